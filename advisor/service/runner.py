"""Run one job under its lease: claim, run (retrying storage outages), finish.

- The lease is renewed every ``heartbeat_s`` by a thread (``LeaseKeeper``); when a renewal
  finds it taken over, the run stops at its next trial and writes nothing more: every write
  of the job's thread is fenced (``advisor.service.fencing``) and ``finish`` is conditional on
  the lease.
- A storage error during the run (PostgreSQL restarting, a full disk) is retried with backoff
  for up to ``storage_retry_s`` without progress; the study is resumed each time, so the
  finished trials are kept and not repeated. When the storage stays down the job is failed
  with a reason (no host or port in it) and can be retried by its client.
- A re-run (after a retry, a kill or a take-over) adds only the trials the job still owes:
  its first run records the study and its finished trials (``jobs.record_study``), and each
  later run asks for ``trials`` minus those added since. It also samples with another seed,
  so the sampler does not propose again the configurations the first run began with. Its
  report's ``trials.new`` counts the trials of all the job's runs.
- A finished probe or trial whose write meets a storage outage is written again with backoff
  in place (``advisor.storage.transient``), so a restart does not end the run.
- The lease keeper renews on the database's clock and follows the deployment's stored lease
  (``advisor.service.db.store_lease``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from advisor.errors import AdvisorError
from advisor.progress import Meter
from advisor.report.first_answer import block as first_answer_block
from advisor.service import api, hardware, jobs, studies, teams
from advisor.service.fencing import Lease, LeaseLost, fenced, lease_lost
from advisor.service.fencing import install as install_fencing
from advisor.service.outages import backoff, describe, is_storage_error, retry_transient

log = logging.getLogger("advisor.service")
SEED_STEP = 7919  # seed offset between runs of one job (a prime: runs never share a seed)


@dataclass(frozen=True)
class RunSettings:
    """How a worker keeps its lease and rides out storage outages."""

    heartbeat_s: float = 2.0
    storage_retry_s: float = 120.0
    # How long waiting for one of this host's probe locks (the slot, a configuration's) still
    # renews the lease: a live holder keeps one for a probe (time-out 120 s) or a screen's
    # few probes in one process. A prior (a screen of 2 probes at their time-out, with a
    # margin; 120-600 s would do).
    slot_wait_s: float = 300.0

    def __post_init__(self) -> None:
        if self.heartbeat_s <= 0 or self.storage_retry_s < 0 or self.slot_wait_s < 0:
            raise ValueError(f"bad run settings {self!r}")


class LeaseKeeper(threading.Thread):
    """Renews the job's lease (with its progress) until stopped; notes when it was lost.

    It renews every quarter of the deployment's lease (read back at each renewal, so a
    changed lease is followed), at most every ``every_s``; after a failed renewal (the
    database restarting) it tries again every ``RETRY_S``. A job that waits for one of this
    host's probe locks (the slot, or a configuration's: issue #50) longer than ``slot_wait_s``
    is not progressing: renewals stop, so a sweeper re-queues it for a worker where the lock
    is free (a stopped holder is passed after a second: ``advisor.evaluation.probe_slot``)."""

    RETRY_S = 0.25

    def __init__(
        self, storage: str, lease: Lease, every_s: float, slot_wait_s: float = 300.0
    ) -> None:
        super().__init__(daemon=True, name=f"advisor-lease-{lease.job_id[:8]}")
        self.storage, self.lease, self.every_s = storage, lease, every_s
        self.slot_wait_s = slot_wait_s
        self.progress: dict[str, Any] = {}
        self.first_answer: dict[str, Any] | None = None  # issue #46: carried with the progress
        self.meter = Meter()  # issue #50: the time left, from the measured rate
        self.lost = threading.Event()
        self.stopped = threading.Event()
        self.waiting_since: float | None = None  # monotonic; None: waiting for no probe lock
        self.last_progress = time.monotonic()
        # A renewal and the job's end never overlap (issue #50: a renewal whose UPDATE ran just
        # after ``finish`` committed found the job no longer running and warned "lease taken
        # over" after a normal finish, 2 jobs in 72): ``ending`` holds this lock around each
        # attempt to record the end, and a renewal checks ``stopped`` under it.
        self._renewing = threading.Lock()

    def run(self) -> None:
        pause = min(self.every_s, self.RETRY_S)
        while not self.stopped.wait(pause):
            since = self.waiting_since
            if since is not None and time.monotonic() - since > self.slot_wait_s:
                pause = self.RETRY_S  # waiting too long: not progressing, no renewal
                continue
            try:
                with self._renewing:
                    if self.stopped.is_set():  # the job's end was recorded meanwhile
                        return
                    lease_s = jobs.renew(self.storage, self.lease, self.progress or None)
            except Exception as exc:  # the database may be restarting: keep trying
                log.warning("job %s: lease renewal failed (%s)", self.lease.job_id, describe(exc))
                pause = self.RETRY_S
                continue
            if lease_s is None:
                log.warning("job %s: lease %d taken over", self.lease.job_id, self.lease.number)
                self.lost.set()
                return
            pause = min(self.every_s, lease_s / 4)

    def wait_for_slot(self, waiting: bool) -> None:
        """A probe lock of this host (the slot, a configuration's) is busy (True: the wait
        starts) or now held or passed (False). After a
        wait past ``slot_wait_s`` the lease is renewed at once, and LeaseLost raised when it
        expired meanwhile."""
        if waiting:
            self.waiting_since = time.monotonic()
            return
        since, self.waiting_since = self.waiting_since, None
        waited_too_long = since is not None and time.monotonic() - since > self.slot_wait_s
        progress = self.progress or None
        if waited_too_long and jobs.renew(self.storage, self.lease, progress) is None:
            self.lost.set()
        self.check()

    def report(self, phase: str, done: int, total: int) -> None:
        """The run's progress callback: note it (issue #50: with the stage's words and the
        time left at its measured rate, ``advisor.progress``), and stop the run if the lease
        was lost."""
        now = self.meter.update(phase, done, total)
        self.progress = {
            "phase": phase,
            "done": done,
            "total": total,
            "label": now.label,
            "elapsed_s": round(now.elapsed_s, 1),
            "left_s": None if now.left_s is None else round(now.left_s, 1),
            "left": now.left_text,
            **({"first_answer": self.first_answer} if self.first_answer else {}),
        }  # one atomic swap
        self.last_progress = time.monotonic()
        self.check()

    def heard_first(self, report: dict[str, Any]) -> None:
        """The first answer (issue #36), told with the progress until the job ends (issue
        #46: a job's first answer, as ``advisor suggest`` prints one): what its block shows."""
        self.first_answer = first_answer_block(report)
        if self.first_answer:
            self.progress = {**self.progress, "first_answer": self.first_answer}

    def ending(self, record: Callable[[], None]) -> None:
        """``record`` the job's end (``jobs.finish``, conditional on the lease) with no renewal
        in flight, and stop renewing once it is recorded: a renewal after the end would find
        the job no longer running and say its lease was taken over. A failed attempt (the
        database restarting) leaves the renewals going until the next one."""
        with self._renewing:
            record()
            self.stopped.set()

    def check(self) -> None:
        """Raise LeaseLost once the lease was taken over."""
        if self.lost.is_set():
            raise LeaseLost(f"job {self.lease.job_id}: lease {self.lease.number} taken over")

    def __enter__(self) -> LeaseKeeper:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stopped.set()


def execute_job(
    storage: str,
    job_id: str,
    worker: str,
    backend: str | None = None,
    settings: RunSettings | None = None,
) -> str:
    """Claim and run one job; its final status ('done', 'failed'), 'skipped' when another
    worker has it, 'superseded' when its lease was taken over, 'unfinished' when neither
    the job nor its failure could be written (its lease then expires and it is re-queued)."""
    settings = settings or RunSettings()

    def retried(exc: BaseException, delay: float) -> None:
        log.warning("job %s: %s; retrying in %.1f s", job_id, describe(exc), delay)

    try:
        job = retry_transient(
            lambda: jobs.claim(storage, job_id, worker), settings.storage_retry_s, on_retry=retried
        )
    except Exception as exc:
        if not is_storage_error(exc):
            raise
        log.error("job %s: cannot claim it (%s); the sweeper will offer it again", job_id, exc)
        return "unfinished"
    if job is None:
        return "skipped"
    lease = Lease(job_id, int(job["lease"]))
    install_fencing()  # before the lease keeper's thread connects
    with LeaseKeeper(storage, lease, settings.heartbeat_s, settings.slot_wait_s) as keeper:
        result: dict[str, Any] | None = None
        error: str | None = None
        try:
            with fenced(lease):
                result = _run(storage, job, keeper, backend, settings)
        except Exception as exc:
            if lease_lost(exc):
                log.warning("job %s: lease %d taken over; stopped", job_id, lease.number)
                return "superseded"
            error = _error_text(job_id, exc, settings)
        try:  # outside the fence: finish is itself conditional on the lease
            retry_transient(
                lambda: keeper.ending(lambda: jobs.finish(storage, lease, result, error)),
                settings.storage_retry_s,
                on_retry=retried,
            )
        except LeaseLost:
            log.warning("job %s: lease %d taken over before it finished", job_id, lease.number)
            return "superseded"
        except Exception as exc:
            log.error("job %s: cannot record its end (%s)", job_id, describe(exc))
            return "unfinished"
    return "failed" if error else "done"


def _error_text(job_id: str, exc: BaseException, settings: RunSettings) -> str:
    """The job's one-line error: the user's problem as the advisor says it, a storage outage
    in words without addresses, anything else as an internal error."""
    if is_storage_error(exc):
        return (
            f"{describe(exc)} for over {settings.storage_retry_s:.0f} s; finished trials are "
            f"kept: retry the job (POST /v1/jobs/{job_id}/retry) once the storage is back"
        )
    if isinstance(exc, AdvisorError):
        return str(exc)
    log.exception("job %s failed", job_id)
    return f"internal error ({type(exc).__name__}); see the service's log"


def _run(
    storage: str,
    job: dict[str, Any],
    keeper: LeaseKeeper,
    backend: str | None,
    settings: RunSettings,
) -> dict[str, Any]:
    """The job's report, re-running the study while the storage fails transiently."""
    if job["kind"] != "suggest":
        raise AdvisorError(f"Unknown job kind '{job['kind']}'.", "use one of: suggest.")
    runs = 0
    failing_since: float | None = None
    delays = backoff()
    while True:
        keeper.check()
        try:
            with hardware.team_scope(storage, job["team"]):  # issue #37: its machines
                request = _request_for_run(storage, job, keeper.lease, backend, runs)
                runs += 1
                report = _suggest(request, storage, keeper, backend, settings)
            if keeper.lease.number > 1 or runs > 1:  # earlier runs added trials too
                added = studies.finished_trials(storage, job["study"]) - int(job["trials_before"])
                report.setdefault("trials", {})["new"] = added
            report["study"] = teams.public_name(job["team"], report["study"]) or report["study"]
            return report
        except Exception as exc:
            if lease_lost(exc) or not is_storage_error(exc):
                raise
            now = time.monotonic()
            if failing_since is None or keeper.last_progress > failing_since:
                failing_since, delays = now, backoff()  # a new outage: back off from the start
            delay = next(delays)
            if now - failing_since + delay > settings.storage_retry_s:
                raise
            log.warning("job %s: %s; resuming in %.1f s", job["id"], describe(exc), delay)
            time.sleep(delay)


def _suggest(
    request: dict[str, Any],
    storage: str,
    keeper: LeaseKeeper,
    backend: str | None,
    settings: RunSettings,
) -> dict[str, Any]:
    """``api.suggest``: a probe of this host holds the host's probe slot only while it
    runs, and a long wait for a probe lock stops the lease's renewals (``LeaseKeeper``); a finished
    probe or trial whose write meets a storage outage is written again with backoff (up to
    ``storage_retry_s``) instead of being lost with the run."""

    def transient(exc: BaseException) -> bool:
        return is_storage_error(exc) and not lease_lost(exc)

    def retried(exc: BaseException, delay: float) -> None:
        log.warning(
            "job %s: a write failed (%s); again in %.1f s",
            keeper.lease.job_id,
            describe(exc),
            delay,
        )

    def policy(call: Any) -> Any:
        return retry_transient(call, settings.storage_retry_s, transient, retried)

    with api.probe_slot_listener(keeper.wait_for_slot), api.retrying_writes(policy):
        return api.suggest(request, storage, keeper.report, backend, keeper.heard_first)


def _request_for_run(
    storage: str, job: dict[str, Any], lease: Lease, backend: str | None, runs: int
) -> dict[str, Any]:
    """The request this run sends: the team's study, the trials still owed, the seed."""
    request = dict(job["request"])
    team = job["team"]
    if job["study"] is None:  # the job's first run: remember where it starts from
        public = request.get("study_name") or api.resolved_study(request, backend)
        stored = teams.stored_name(team, public)
        before = studies.finished_trials(storage, stored)
        jobs.record_study(storage, lease, stored, before)
        job.update(study=stored, trials_before=before)
    if team != teams.DEFAULT_TEAM:
        request["study_name"] = job["study"]
    if request.get("trials") is not None:
        added = studies.finished_trials(storage, job["study"]) - int(job["trials_before"] or 0)
        owed = int(request["trials"]) - added
        if owed > 0:
            request["trials"] = owed
        else:  # all written (the run was cut short just after): the report, no new trial
            request.pop("trials")
            studies.mark_stopped(storage, job["study"])
    run_index = 32 * (lease.number - 1) + runs
    if run_index:
        request["seed"] = (int(request.get("seed", 0)) + SEED_STEP * run_index) % 2**32
    return request
