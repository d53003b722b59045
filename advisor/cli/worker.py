"""`advisor worker`: run queued service jobs from Redis (team setup)."""

from __future__ import annotations

import click


@click.command("worker")
@click.option("--redis", "redis_url", required=True, help="Redis URL of the job queue.")
@click.option("--storage", help="The same storage URL as `advisor serve --storage`.")
@click.option("--burst", is_flag=True, help="Exit when the queue is empty (tests, cron).")
def worker(redis_url: str, storage: str | None, burst: bool) -> None:
    """Run suggestion jobs from the queue; start one or more on each host.

    Jobs that probe this host run one at a time per host; a killed worker's job is re-queued
    by the server once its heartbeat stops, and resumes its study.
    """
    from advisor.service.server import run_worker

    run_worker(redis_url, storage, burst)
