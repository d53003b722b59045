"""`advisor serve`: the advisor as an HTTP service (FastAPI + uvicorn)."""

from __future__ import annotations

import click


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8765, show_default=True, help="Port to listen on.")
@click.option(
    "--storage",
    help="Study storage URL shared by servers and workers (default: SQLite in ADVISOR_HOME); "
    "postgresql://user:pass@host/db for a team (pip install 'advisor[postgres]').",
)
@click.option(
    "--redis",
    "redis_url",
    help="Redis URL of the job queue (redis://host:6379/0); jobs then run in `advisor worker` "
    "processes on any host. Default: in-process workers.",
)
@click.option("--workers", type=int, default=2, show_default=True, help="In-process job threads.")
@click.option(
    "--stale-after",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds without a heartbeat after which a running job is re-queued.",
)
@click.option("--max-body", type=int, default=1_000_000, show_default=True, help="Bytes.")
@click.option(
    "--backend",
    "backend_spec",
    hidden=True,
    help="Scoring back end for tests and benchmarks: replay:TABLE.json (default: local probes).",
)
def serve(
    host: str,
    port: int,
    storage: str | None,
    redis_url: str | None,
    workers: int,
    stale_after: float,
    max_body: int,
    backend_spec: str | None,
) -> None:
    """Serve the advisor over HTTP: suggestions (run as jobs), studies, predict, catalog.

    Every endpoint but /health needs a token: `advisor token create NAME`.
    OpenAPI schema at /openapi.json, interactive docs at /docs.
    """
    from advisor.service.server import run_server

    run_server(host, port, storage, redis_url, workers, stale_after, max_body, backend_spec)
