"""Several workers on one study: ``advisor worker --join``, Optuna's RDB storage shared by
processes on any host.

- Trials: ``study.optimize`` on an ``RDBStorage`` with a heartbeat; a worker killed mid-trial
  leaves a RUNNING trial whose heartbeat stops, which the next worker's ``optimize`` fails
  (``fail_stale_trials``), and ``RetryFailedTrialCallback`` queues a copy that exactly one
  worker takes (Optuna pops a waiting trial atomically). No trial stays RUNNING forever.
- Probes: a probe is claimed by inserting (study, probe key) into ``advisor_probe_claims``,
  whose primary key makes the database refuse a second claim; the loser waits for the
  winner's result and reuses it. A claim whose worker died before writing a result is taken
  over after ``stale_s``. The probe key is the candidate (machine, with ``:spot``), the batch
  size and the hyperparameters that change the run time.

The trials are recorded with the same attributes as ``advisor suggest`` writes, so a later
suggestion on the same study (``study_name``) resumes from them and reports.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import warnings
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from advisor.errors import AdvisorError
from advisor.service import api, db

HEARTBEAT_S = 5
GRACE_S = 15
MAX_RETRY = 3
MAX_OUTAGES = 30
log = logging.getLogger("advisor.service")


@dataclass
class WorkerStats:
    """What one worker did: trials finished, probes run by it, probes reused from others."""

    trials: int = 0
    probes_run: int = 0
    probes_reused: int = 0


def rdb_storage(url: str, heartbeat_s: int = HEARTBEAT_S, grace_s: int = GRACE_S) -> Any:
    """Optuna's RDB storage with a heartbeat and stale-trial retry (Optuna 4.9+ renamed
    ``RetryFailedTrialCallback`` to ``RetryHeartbeatStaleTrialCallback``). Several processes
    creating a new storage's schema at once may collide: that is retried."""
    import optuna
    from optuna.storages import RetryHeartbeatStaleTrialCallback
    from sqlalchemy.exc import SQLAlchemyError

    for attempt in range(5):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    db.optuna_url(url),
                    heartbeat_interval=heartbeat_s,
                    grace_period=grace_s,
                    heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(
                        max_retry=MAX_RETRY
                    ),
                    engine_kwargs={"pool_pre_ping": True} if url.startswith("postgresql") else None,
                )
        except SQLAlchemyError:
            if attempt == 4:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def run_trials(
    storage: str,
    request: dict[str, Any],
    n_trials: int,
    worker_index: int = 0,
    heartbeat_s: int = HEARTBEAT_S,
    grace_s: int = GRACE_S,
    stale_s: float | None = None,
    backend: str | None = None,
) -> WorkerStats:
    """Join the study of ``request`` (its ``study_name`` is required) and run ``n_trials``;
    ``backend`` scores them (``replay:PATH.json``; None: local probes, as ``advisor suggest``)."""
    import optuna

    if not request.get("study_name"):
        raise AdvisorError("Joining a study needs its name.", "pass study_name in the request.")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    parts = api.study_parts(request, storage, seed_offset=worker_index, backend=backend)
    rdb = rdb_storage(storage, heartbeat_s, grace_s)
    study = optuna.create_study(
        study_name=parts.name,
        storage=rdb,
        directions=parts.directions,
        sampler=parts.sampler,
        load_if_exists=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study.set_metric_names(parts.metric_names)
    for key, value in parts.study_attrs.items():
        study.set_user_attr(key, value)
    stats = WorkerStats()
    me = f"{socket.gethostname()}:{os.getpid()}"
    claims = _Claims(storage, parts.name, me, grace_s if stale_s is None else stale_s)

    def objective(trial: optuna.trial.Trial) -> Any:
        cand, batch, hps = parts.sample(trial)
        key = f"{cand.key}|{batch}|{json.dumps(parts.runtime_hps(hps), sort_keys=True)}"
        ev_dict = claims.result_or_claim(key)
        if ev_dict is None:  # ours to probe
            ev = parts.evaluate(cand, batch, hps)
            claims.store(key, api.evaluation_to_dict(ev, trial.number))
            stats.probes_run += 1
            charged = ev.probe_cost_usd
        else:
            ev = api.evaluation_from_dict(ev_dict)
            stats.probes_reused += 1
            charged = 0.0
            trial.set_user_attr("probe_of_trial", ev_dict["trial"])
        api.record_trial(trial, ev, charged, parts, cand)
        stats.trials += 1
        if not ev.ok:  # the record holds the reason (pruned_reason)
            raise optuna.TrialPruned(ev.error or "probe failed")
        return parts.values(ev, trial)

    outages = 0
    while stats.trials < n_trials:
        try:
            fail_orphans(storage, rdb, study, grace_s)
            study.optimize(objective, n_trials=n_trials - stats.trials, gc_after_trial=False)
        except Exception as exc:  # the database restarted or is unreachable: wait, go on
            if not _storage_error(exc):
                raise
            outages += 1
            if outages > MAX_OUTAGES:
                raise AdvisorError(
                    f"The storage failed {outages} times ({type(exc).__name__}).",
                    "check that the database is up; finished trials are kept.",
                ) from exc
            log.warning("storage unreachable (%s); retrying in %.0f s", type(exc).__name__, 2.0)
            time.sleep(2.0)
    return stats


def fail_orphans(storage: str, rdb: Any, study: Any, grace_s: float) -> list[int]:
    """Fail (and queue a retry of) RUNNING trials older than ``grace_s`` that never got a
    heartbeat row: a trial created while the database was going down. Optuna's own
    ``fail_stale_trials`` only sees trials with a heartbeat, so these would stay RUNNING
    forever. Reads Optuna's ``trials`` and ``trial_heartbeats`` tables (stable since v2)."""
    import datetime

    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.storages import RetryHeartbeatStaleTrialCallback
    from optuna.trial import TrialState
    from sqlalchemy import text

    cutoff = datetime.datetime.now() - datetime.timedelta(seconds=grace_s)
    with db.engine_for(storage).connect() as conn:
        rows = conn.execute(
            text(
                "SELECT t.trial_id FROM trials t LEFT JOIN trial_heartbeats h "
                "ON h.trial_id = t.trial_id WHERE t.study_id = :sid AND t.state = 'RUNNING' "
                "AND h.trial_id IS NULL AND t.datetime_start < :cutoff"
            ),
            {"sid": rdb.get_study_id_from_name(study.study_name), "cutoff": cutoff},
        ).all()
    failed = []
    retry = RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY)
    for (trial_id,) in rows:
        try:  # another worker sweeping the same orphan: only one of us fails (and retries) it
            changed = rdb.set_trial_state_values(trial_id, state=TrialState.FAIL)
        except UpdateFinishedTrialError:
            continue
        if changed:
            frozen = rdb.get_trial(trial_id)
            log.warning(
                "trial %d had no heartbeat (created during an outage): failed", frozen.number
            )
            retry(study, frozen)
            failed.append(frozen.number)
    return failed


def _storage_error(exc: BaseException | None) -> bool:
    """True when ``exc`` or an exception it was raised from is a database error (Optuna may
    mask one behind another error raised while it cleans up the trial)."""
    from sqlalchemy.exc import SQLAlchemyError

    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, SQLAlchemyError):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


class _Claims:
    """The probe-claim rows of one study (see the module's docstring)."""

    def __init__(self, storage: str, study: str, worker: str, stale_s: float) -> None:
        self.engine = db.engine_for(storage)
        self.study, self.worker, self.stale_s = study, worker, stale_s

    def result_or_claim(self, key: str, wait_s: float = 600.0) -> dict[str, Any] | None:
        """The stored result for ``key``, or None when this worker now holds the claim."""
        c = db.probe_claims.c
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    insert(db.probe_claims).values(
                        study=self.study, probe_key=key, worker=self.worker, created=time.time()
                    )
                )
            return None
        except IntegrityError:
            pass
        end = time.time() + wait_s
        while time.time() < end:
            with self.engine.begin() as conn:
                row = conn.execute(
                    select(c.result, c.created).where(c.study == self.study, c.probe_key == key)
                ).first()
                if row is not None and row.result is not None:
                    return dict(json.loads(row.result))
                taken = conn.execute(
                    update(db.probe_claims)
                    .where(
                        c.study == self.study,
                        c.probe_key == key,
                        c.result.is_(None),
                        c.created < time.time() - self.stale_s,
                    )
                    .values(worker=self.worker, created=time.time())
                )
                if taken.rowcount == 1:  # its worker died mid-probe: ours now
                    return None
            time.sleep(0.05)
        raise AdvisorError(
            f"Waited {wait_s:.0f} s for another worker's probe of {key}.",
            "check the other workers; the claim is taken over once it is stale.",
        )

    def store(self, key: str, result: dict[str, Any]) -> None:
        """Write the probe's result on our claim."""
        c = db.probe_claims.c
        with self.engine.begin() as conn:
            conn.execute(
                update(db.probe_claims)
                .where(c.study == self.study, c.probe_key == key)
                .values(result=json.dumps(result, default=str))
            )
