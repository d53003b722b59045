"""Run jobs: in-process threads (embedded ``advisor serve``) or an RQ queue over Redis
(``advisor serve --redis URL`` plus ``advisor worker`` processes on any host).

A running job beats its heartbeat into the job record; ``Reaper`` re-queues jobs whose worker
stopped beating (killed), and a resumed suggestion continues its study, whose finished trials
are already stored. Suggestions that probe this host run one at a time per host (a file lock
in ``$ADVISOR_HOME``), because a probe times the CPU; replayed or modelled work runs in
parallel.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from advisor.errors import AdvisorError
from advisor.service import api, jobs

log = logging.getLogger("advisor.service")
HEARTBEAT_S = 2.0
QUEUE_NAME = "advisor"
STORAGE_ENV = "ADVISOR_SERVICE_STORAGE"  # set by `advisor worker` for its jobs
# The scoring back end of this `advisor worker` process's queued jobs (its hidden --backend,
# for tests and benchmarks; None: local probes). RQ forks each job's work horse from it.
_WORKER_BACKEND: list[str | None] = [None]


def worker_name() -> str:
    """host:pid:thread, recorded on the jobs a worker runs."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident() % 100000}"


@contextlib.contextmanager
def host_probe_lock() -> Iterator[None]:
    """One local-probing job at a time on this host (across processes)."""
    import fcntl

    from advisor.config import home

    home().mkdir(parents=True, exist_ok=True)
    with open(home() / "local-probes.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def execute_job(storage: str, job_id: str, backend: str | None = None) -> str:
    """Claim and run one job; return its final status ('skipped' if another worker has it).
    ``backend`` scores suggestions (``replay:PATH.json``; None: local probes)."""
    job = jobs.claim(storage, job_id, worker_name())
    if job is None:
        return "skipped"
    state: dict[str, Any] = {}
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            try:
                jobs.heartbeat(storage, job_id, dict(state) or None)
            except Exception as exc:  # the database may be restarting; keep beating
                log.warning("job %s: heartbeat failed (%s)", job_id, type(exc).__name__)

    def progress(phase: str, done: int, total: int) -> None:
        state.update(phase=phase, done=done, total=total)

    beater = threading.Thread(target=beat, daemon=True)
    beater.start()
    try:
        result = _run(storage, job, progress, backend)
        jobs.finish(storage, job_id, result, None)
        return "done"
    except AdvisorError as exc:
        jobs.finish(storage, job_id, None, str(exc))
        return "failed"
    except Exception as exc:
        log.exception("job %s failed", job_id)
        try:
            jobs.finish(storage, job_id, None, _error_line(exc))
        except Exception as again:  # the storage cannot be written: the reaper re-queues it
            log.error("job %s: cannot record its failure (%s)", job_id, type(again).__name__)
            return "lost"
        return "failed"
    finally:
        stop.set()


def _error_line(exc: BaseException) -> str:
    """One line for a job that failed on something other than the user's input."""
    from sqlalchemy.exc import SQLAlchemyError

    if isinstance(exc, SQLAlchemyError):
        orig = getattr(exc, "orig", None) or exc
        first = (str(orig).strip().splitlines() or [""])[0][:120]
        return (
            f"the study storage failed ({type(orig).__name__}: {first}); finished trials are "
            "kept: free the disk or restart the database, then submit again"
        )
    return f"internal error ({type(exc).__name__}); see the service's log"


def execute_queued(job_id: str) -> str:
    """RQ entry point: run the job against this worker's storage (``advisor worker``)."""
    return execute_job(os.environ[STORAGE_ENV], job_id, _WORKER_BACKEND[0])


def set_worker_backend(backend: str | None) -> None:
    """The back end this worker process's queued jobs score with (``advisor worker``)."""
    _WORKER_BACKEND[0] = backend


def _run(
    storage: str, job: dict[str, Any], progress: api.Progress, backend: str | None
) -> dict[str, Any]:
    if job["kind"] == "suggest":
        if api.uses_local_probes(backend):
            with host_probe_lock():
                return api.suggest(job["request"], storage, progress, backend)
        return api.suggest(job["request"], storage, progress, backend)
    raise AdvisorError(f"Unknown job kind '{job['kind']}'.", "use one of: suggest.")


class ThreadDispatcher:
    """Embedded mode: jobs run in this process's thread pool."""

    def __init__(self, storage: str, threads: int = 2, backend: str | None = None) -> None:
        self.storage, self.backend = storage, backend
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="advisor-job")

    def dispatch(self, job_id: str) -> None:
        """Run the job soon."""
        self.pool.submit(execute_job, self.storage, job_id, self.backend)

    def close(self) -> None:
        """Stop taking jobs; running ones finish."""
        self.pool.shutdown(wait=False, cancel_futures=True)


class RQDispatcher:
    """Team mode: jobs go to an RQ queue in Redis; ``advisor worker`` processes run them."""

    def __init__(self, storage: str, redis_url: str) -> None:
        from redis import Redis
        from rq import Queue

        self.storage = storage
        self.queue = Queue(QUEUE_NAME, connection=Redis.from_url(redis_url))

    def dispatch(self, job_id: str) -> None:
        """Put the job's id on the queue (only the id: the storage URL, which may hold a
        password, stays with each worker's own --storage)."""
        self.queue.enqueue(
            execute_queued, job_id, job_timeout=-1, result_ttl=600, failure_ttl=86400
        )

    def close(self) -> None:
        """Nothing to stop: the queue lives in Redis."""


class Reaper(threading.Thread):
    """Every ``every_s``: re-queue jobs whose worker stopped beating, dispatch queued jobs."""

    def __init__(self, storage: str, dispatcher: Any, stale_s: float, every_s: float) -> None:
        super().__init__(daemon=True, name="advisor-reaper")
        self.storage, self.dispatcher = storage, dispatcher
        self.stale_s, self.every_s = stale_s, every_s
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            try:
                for job_id in jobs.requeue_stale(self.storage, self.stale_s):
                    log.warning("job %s: its worker stopped beating; re-queued", job_id)
                    self.dispatcher.dispatch(job_id)
            except Exception as exc:
                log.warning("reaper: %s", type(exc).__name__)
