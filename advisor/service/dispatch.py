"""Run jobs: in-process threads (embedded ``advisor serve``) or an RQ queue over Redis
(``advisor serve --redis URL`` plus ``advisor worker`` processes on any host).

The job's row in the database is the truth, a queue entry only a wake-up (``jobs``'s
docstring has the contract). The ``Sweeper`` (a thread of every ``advisor serve`` and every
``advisor worker``) re-queues jobs whose lease expired and hands the queue every queued job
it does not hold: one whose enqueue failed (Redis down), whose queue entry was lost (Redis
restarted empty) or whose worker died between taking the entry and claiming the job. A job
offered twice is claimed once (the claim is a conditional UPDATE). Probes of this host run
one at a time per host, because a probe times the CPU: each holds the host's probe slot
(``advisor.evaluation.probe_slot``) only while it runs; the rest of a job runs in parallel.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from advisor.service import jobs, runner
from advisor.service.outages import describe

log = logging.getLogger("advisor.service")
QUEUE_NAME = "advisor"
STORAGE_ENV = "ADVISOR_SERVICE_STORAGE"  # set by `advisor worker` for its jobs
_RQ_PREFIX = "advisor-"
# The scoring back end and run settings of this `advisor worker` process's queued jobs (its
# hidden --backend, for tests and benchmarks; None: local probes). RQ forks each job's work
# horse from it.
_WORKER: dict[str, Any] = {"backend": None, "settings": None}


def worker_name() -> str:
    """host:pid:thread, recorded on the jobs a worker runs."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident() % 100000}"


def execute_job(
    storage: str,
    job_id: str,
    backend: str | None = None,
    settings: runner.RunSettings | None = None,
) -> str:
    """Claim and run one job (``runner.execute_job``); its final status."""
    return runner.execute_job(storage, job_id, worker_name(), backend, settings)


def execute_queued(job_id: str) -> str:
    """RQ entry point: run the job against this worker's storage (``advisor worker``)."""
    return execute_job(os.environ[STORAGE_ENV], job_id, _WORKER["backend"], _WORKER["settings"])


def set_worker_backend(backend: str | None, settings: runner.RunSettings | None = None) -> None:
    """The back end and run settings of this worker process's queued jobs."""
    _WORKER.update(backend=backend, settings=settings)


class ThreadDispatcher:
    """Embedded mode: jobs run in this process's thread pool."""

    def __init__(
        self,
        storage: str,
        threads: int = 2,
        backend: str | None = None,
        settings: runner.RunSettings | None = None,
    ) -> None:
        self.storage, self.backend, self.settings = storage, backend, settings
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="advisor-job")
        self._waiting: set[str] = set()
        self._lock = threading.Lock()

    def dispatch(self, job_id: str, front: bool = False) -> None:
        """Run the job soon (``front``: a re-queued job; the pool takes jobs in order)."""
        with self._lock:
            self._waiting.add(job_id)
        self.pool.submit(self._run, job_id)

    def _run(self, job_id: str) -> str:
        with self._lock:
            self._waiting.discard(job_id)
        return execute_job(self.storage, job_id, self.backend, self.settings)

    def waiting_ids(self) -> set[str]:
        """Jobs handed to the pool and not yet started."""
        with self._lock:
            return set(self._waiting)

    def close(self) -> None:
        """Stop taking jobs; running ones finish."""
        self.pool.shutdown(wait=False, cancel_futures=True)


def redis_connection(url: str) -> Any:
    """A Redis client that fails fast when Redis is down (a request must not hang on it)."""
    from redis import Redis

    return Redis.from_url(
        url, socket_connect_timeout=3, socket_timeout=10, health_check_interval=15
    )


class RQDispatcher:
    """Team mode: jobs go to an RQ queue in Redis; ``advisor worker`` processes run them."""

    def __init__(self, storage: str, redis_url: str) -> None:
        from rq import Queue

        self.storage = storage
        self.queue = Queue(QUEUE_NAME, connection=redis_connection(redis_url))

    def dispatch(self, job_id: str, front: bool = False) -> None:
        """Put the job's id on the queue (only the id: the storage URL, which may hold a
        password, stays with each worker's own --storage); ``front``: a job whose lease
        expired goes first, not behind the jobs queued meanwhile."""
        self.queue.enqueue(
            execute_queued,
            job_id,
            at_front=front,
            job_id=f"{_RQ_PREFIX}{job_id}-{uuid.uuid4().hex[:8]}",
            job_timeout=-1,
            result_ttl=600,
            failure_ttl=86400,
        )

    def waiting_ids(self) -> set[str]:
        """Advisor jobs waiting in the queue."""
        return {
            rq_id[len(_RQ_PREFIX) :].split("-")[0]
            for rq_id in self.queue.get_job_ids()
            if rq_id.startswith(_RQ_PREFIX)
        }

    def close(self) -> None:
        """Nothing to stop: the queue lives in Redis."""


class Sweeper(threading.Thread):
    """Every ``every_s``: re-queue jobs whose lease expired (the deployment's stored lease
    without renewal, on the database's clock), and hand the dispatcher every queued job it
    does not hold (see the module docstring); re-queued ones go to the queue's front."""

    def __init__(self, storage: str, dispatcher: Any, every_s: float) -> None:
        super().__init__(daemon=True, name="advisor-sweeper")
        self.storage, self.dispatcher = storage, dispatcher
        self.every_s = every_s
        self.stopped = threading.Event()
        self._failing: str | None = None

    def run(self) -> None:
        while not self.stopped.wait(self.every_s):
            self.sweep()

    def sweep(self) -> list[str]:
        """One pass; returns the ids handed to the dispatcher (logs, never raises)."""
        handed: list[str] = []
        try:
            for job_id in jobs.requeue_expired(self.storage):
                log.warning("job %s: its lease expired (worker gone or paused); re-queued", job_id)
            queued = jobs.queued(self.storage, older_than_s=min(self.every_s, 5.0))
            if queued:
                held = self.dispatcher.waiting_ids()
                front = [j for j, ran_before in queued if ran_before and j not in held]
                back = [j for j, ran_before in queued if not ran_before and j not in held]
                for job_id in reversed(front):  # each put first: they keep their order
                    self.dispatcher.dispatch(job_id, front=True)
                for job_id in back:
                    self.dispatcher.dispatch(job_id)
                handed += front + back
            if self._failing is not None:
                log.warning("sweeper: working again (after: %s)", self._failing)
                self._failing = None
        except Exception as exc:
            what = describe(exc)
            if what != self._failing:  # one line per outage, not one per pass
                log.warning("sweeper: %s; retrying every %.0f s", what, self.every_s)
            self._failing = what
        if handed:
            log.info("sweeper: offered %d queued job(s) to the workers", len(handed))
        return handed
