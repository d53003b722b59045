"""Start the service's processes: the HTTP server and queue workers.

Both wait for the storage at start (with backoff, up to ``STARTUP_WAIT_S``) instead of exiting,
and both run a ``Sweeper``. A worker whose connection to Redis fails goes on with the job it
runs, then reconnects with backoff; it exits only when asked (SIGTERM, SIGINT) or, with
``--burst``, when the queue is empty. Asked to stop, an idle worker exits at once and a busy
one after its job, with 143 (SIGTERM) or 130 (SIGINT).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path
from typing import Any

from advisor.errors import AdvisorError
from advisor.service import db
from advisor.service.outages import backoff, describe, is_queue_error, retry_transient

log = logging.getLogger("advisor.service")
STARTUP_WAIT_S = 120.0
_LOG_FORMAT = "%(asctime)s %(name)s %(message)s"


def storage_url(storage: str | None) -> str:
    """``--storage`` or the default SQLite file (its folder created); checked reachable."""
    from advisor.service.api import prepare_storage, resolve_storage

    url = resolve_storage(storage)
    db.ping(url)
    prepare_storage(url)
    return url


def storage_from(storage: str | None, storage_file: Path | None) -> str | None:
    """The storage URL from ``--storage`` (or ``ADVISOR_STORAGE``) or from ``--storage-file``
    (a file holding the URL, such as a Docker or Kubernetes secret), never both."""
    if storage_file is None:
        return storage
    if storage is not None:
        raise AdvisorError(
            "Both --storage (or ADVISOR_STORAGE) and --storage-file are given.",
            "pass one of them.",
        )
    try:
        text = storage_file.read_text().strip()
    except OSError as exc:
        raise AdvisorError(
            f"Cannot read --storage-file {storage_file} ({exc.strerror}).", "fix the path."
        ) from exc
    if not text:
        raise AdvisorError(f"--storage-file {storage_file} is empty.", "write the URL in it.")
    return text


def wait_for_storage(storage: str | None, budget_s: float = STARTUP_WAIT_S) -> str:
    """``storage_url``, retried with backoff while the database is unreachable."""

    def waiting(exc: BaseException, delay: float) -> None:
        log.warning("storage: %s; trying again in %.0f s", describe(exc), delay)

    return retry_transient(lambda: storage_url(storage), budget_s, on_retry=waiting)


def run_server(
    host: str,
    port: int,
    storage: str | None,
    redis_url: str | None,
    workers: int,
    stale_after: float | None,
    max_body: int,
    backend: str | None = None,
) -> None:
    """Serve until interrupted; queued jobs left from before are dispatched at start.
    ``stale_after`` sets the deployment's lease (stored; None: keep the stored one, 30 s on a
    new storage). ``backend`` scores in-process jobs (tests: ``replay:PATH.json``; None:
    local probes)."""
    import uvicorn

    from advisor.service.app import Settings, create_app
    from advisor.service.dispatch import RQDispatcher, Sweeper, ThreadDispatcher
    from advisor.service.runner import RunSettings

    logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT)
    url = wait_for_storage(storage)
    lease = db.store_lease(url, stale_after, replace=stale_after is not None)
    log.info("the jobs' lease: %.1f s (stored in the storage, for every process)", lease)
    settings = RunSettings()
    dispatcher = (
        RQDispatcher(url, redis_url)
        if redis_url
        else ThreadDispatcher(url, workers, backend, settings)
    )
    sweeper = Sweeper(url, dispatcher, sweep_every(lease))
    sweeper.sweep()  # what was queued before, or re-queued now
    sweeper.start()
    app = create_app(Settings(url, dispatcher, max_body))
    mode = "redis queue" if redis_url else f"{workers} in-process workers"
    log.info("advisor serve on http://%s:%d (%s; storage %s)", host, port, mode, _safe(url))
    try:
        uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)
    finally:
        sweeper.stopped.set()
        dispatcher.close()


def sweep_every(stale_after: float) -> float:
    """How often a sweeper runs: a quarter of the lease, between 0.5 and 10 s."""
    return min(max(stale_after / 4, 0.5), 10.0)


def run_worker(
    redis_url: str,
    storage: str | None,
    burst: bool,
    backend: str | None = None,
    stale_after: float | None = None,
) -> None:
    """An RQ worker on the advisor's queue; ``backend`` scores its jobs (None: local probes).
    Its sweeper re-queues expired leases and re-offers queued jobs, so jobs go on while no
    ``advisor serve`` runs. ``stale_after`` is stored as the deployment's lease only on a
    storage that has none (``advisor serve --stale-after`` sets it)."""
    from advisor.service.dispatch import (
        STORAGE_ENV,
        RQDispatcher,
        Sweeper,
        set_worker_backend,
    )
    from advisor.service.runner import RunSettings

    logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT)
    set_worker_backend(backend, RunSettings())
    url = wait_for_storage(storage)
    lease = db.store_lease(url, stale_after, replace=False)
    if stale_after is not None and stale_after != lease:
        log.warning(
            "worker: --stale-after %.1f ignored: the deployment's lease is %.1f s (stored; "
            "`advisor serve --stale-after N` changes it)",
            stale_after,
            lease,
        )
    os.environ[STORAGE_ENV] = url  # jobs read it (only the job id travels through Redis)
    if not burst:
        sweeper = Sweeper(url, RQDispatcher(url, redis_url), sweep_every(lease))
        sweeper.start()
    signum = _work(redis_url, burst)
    if signum is not None:  # the CLI's entry point leaves at once with 128 + the signal
        log.info("worker: stopped on request (signal %d)", signum)
        raise SystemExit(128 + signum)


def _work(redis_url: str, burst: bool) -> int | None:
    """RQ's work loop, started again (with backoff) whenever Redis drops it; the signal that
    stopped it (SIGTERM, SIGINT), None when it ended by itself (``burst``)."""
    from rq import Queue

    from advisor.service.dispatch import QUEUE_NAME, redis_connection

    delays = backoff(1.0, 30.0)
    while True:
        started = time.monotonic()
        worker = None
        try:
            conn = redis_connection(redis_url)
            queue = Queue(QUEUE_NAME, connection=conn)
            worker = _resilient_worker_class()([queue], connection=conn)
            worker.work(burst=burst, logging_level="INFO")
        except Exception as exc:  # Redis refused at start-up (naming or registering the worker)
            if not is_queue_error(exc):
                raise
            log.warning("worker: %s", describe(exc))
        else:
            if worker.stop_signal is not None:  # idle: at once; busy: after its job
                return int(worker.stop_signal)
            if burst:
                return None
        if worker is not None:
            _wait_for_horse(worker)
        if time.monotonic() - started > 60:
            delays = backoff(1.0, 30.0)  # it had worked a while: reconnect soon
        delay = next(delays)
        log.warning("worker: lost the queue (Redis); reconnecting in %.0f s", delay)
        time.sleep(delay)


def _wait_for_horse(worker: Any) -> None:
    """Let a job that was running when Redis went away finish (its results go to the
    database, not to Redis) before taking another."""
    pid = int(getattr(worker, "_horse_pid", 0) or 0)
    if pid <= 0:
        return
    log.warning("worker: waiting for job process %d to finish", pid)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _resilient_worker_class() -> Any:
    """RQ's Worker whose heartbeats to Redis, while a job runs, survive a Redis outage."""
    from rq import Worker

    class ResilientWorker(Worker):
        stop_signal: int | None = None  # SIGTERM or SIGINT received

        def request_stop(self, signum: int, frame: Any) -> None:
            # An idle worker's stop request ends RQ's loop as a lost Redis does (its
            # StopRequested is caught inside): note it, so the loop is not started again.
            self.stop_signal = signum
            super().request_stop(signum, frame)

        def maintain_heartbeats(self, job: Any, execution: Any) -> None:
            try:
                super().maintain_heartbeats(job, execution)
            except Exception as exc:
                if not is_queue_error(exc):
                    raise
                self.log.warning("Redis unreachable (%s); the job goes on", type(exc).__name__)

    return ResilientWorker


def _safe(url: str) -> str:
    from advisor.service.api import redacted

    return redacted(url)
