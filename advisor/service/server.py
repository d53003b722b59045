"""Start the service's processes: the HTTP server and queue workers."""

from __future__ import annotations

import logging
import os

from advisor.service import db

log = logging.getLogger("advisor.service")


def storage_url(storage: str | None) -> str:
    """``--storage`` or the default SQLite file (its folder created); checked reachable."""
    from advisor.service.api import prepare_storage, resolve_storage

    url = resolve_storage(storage)
    db.ping(url)
    prepare_storage(url)
    return url


def run_server(
    host: str,
    port: int,
    storage: str | None,
    redis_url: str | None,
    workers: int,
    stale_after: float,
    max_body: int,
    backend: str | None = None,
) -> None:
    """Serve until interrupted; queued jobs left from before are dispatched at start.
    ``backend`` scores in-process jobs (tests: ``replay:PATH.json``; None: local probes)."""
    import uvicorn

    from advisor.service import jobs
    from advisor.service.app import Settings, create_app
    from advisor.service.dispatch import Reaper, RQDispatcher, ThreadDispatcher

    url = storage_url(storage)
    dispatcher = (
        RQDispatcher(url, redis_url) if redis_url else ThreadDispatcher(url, workers, backend)
    )
    for job_id in jobs.requeue_stale(url, stale_after) + jobs.queued_ids(url):
        dispatcher.dispatch(job_id)
    reaper = Reaper(url, dispatcher, stale_after, max(stale_after / 4, 0.5))
    reaper.start()
    app = create_app(Settings(url, dispatcher, max_body))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    mode = "redis queue" if redis_url else f"{workers} in-process workers"
    log.info("advisor serve on http://%s:%d (%s; storage %s)", host, port, mode, _safe(url))
    try:
        uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)
    finally:
        reaper.stopped.set()
        dispatcher.close()


def run_worker(
    redis_url: str, storage: str | None, burst: bool, backend: str | None = None
) -> None:
    """An RQ worker on the advisor's queue; ``backend`` scores its jobs (None: local probes)."""
    from redis import Redis
    from rq import Queue, Worker

    from advisor.service.dispatch import QUEUE_NAME, STORAGE_ENV, set_worker_backend

    set_worker_backend(backend)

    os.environ[STORAGE_ENV] = storage_url(storage)  # checked reachable; jobs read it
    conn = Redis.from_url(redis_url)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    Worker([Queue(QUEUE_NAME, connection=conn)], connection=conn).work(burst=burst)


def _safe(url: str) -> str:
    from advisor.service.api import redacted

    return redacted(url)
