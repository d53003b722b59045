"""Several workers on one study: ``advisor worker --join``, on any host, one shared storage.

Each worker runs the study as ``advisor suggest`` does -- the same set-up
(``advisor.study.run.open_study``) and the same trial loop (``advisor.study.loop.TrialLoop``)
-- with one thing injected: the claims store. On one host the loop's claims are chosen under
a file lock; across hosts ``TableClaims`` lets the database decide: a claim of a (machine,
batch size) is a row of ``advisor_probe_claims`` whose primary key refuses a second one, and a
refused claim makes the loop choose again. A claim is dropped once its trial is written or
given up; one whose worker died is taken over after ``stale_s`` (on the database's clock).
Each finished trial is written in one transaction, so no trial is left RUNNING.

A storage outage is ridden out: a finished trial's write is retried with backoff, and a run
that fails on the storage resumes with the trials still owed (up to ``MAX_OUTAGES`` times).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from advisor.errors import AdvisorError
from advisor.service import api, db
from advisor.service.outages import describe, is_storage_error, retry_transient

GRACE_S = 900.0  # a claim this old was abandoned (a probe is time-boxed at 120 s)
MAX_OUTAGES = 30
WRITE_RETRY_S = 120.0
log = logging.getLogger("advisor.service")


@dataclass
class WorkerStats:
    """What one worker did: trials it wrote, probes it ran (new to its back end)."""

    trials: int = 0
    probes_run: int = 0


class TableClaims:
    """The trial loop's claims store (``advisor.study.claims.ClaimStore``) in the database:
    see the module docstring. Presence marks are the default store's (``Claims``)."""

    def __init__(self, storage: str, optuna_storage: Any, study: Any, stale_s: float) -> None:
        from advisor.study.claims import Claims

        self.base = Claims(optuna_storage, optuna_storage.get_study_id_from_name(study.study_name))
        self.url, self.engine = storage, db.engine_for(storage)
        self.study, self.me, self.stale_s = study.study_name, self.base.owner, stale_s
        self.clock = self.base.clock  # the wall clock the peers' marks are read on

    @property
    def peers_seen_at(self) -> float:
        return self.base.peers_seen_at

    def _fresh(self) -> Any:
        return db.probe_claims.c.created >= db.now(self.url) - self.stale_s

    def _mine(self, config: tuple[str, int] | None = None) -> Any:
        c = db.probe_claims.c
        where = [c.study == self.study, c.worker == self.me]
        if config is not None:
            where.append(c.probe_key == _key(config))
        return and_(*where)

    def hello(self, ended: bool = False) -> None:
        self.base.hello(ended)
        if ended:
            with self.engine.begin() as conn:
                conn.execute(delete(db.probe_claims).where(self._mine()))

    def others(self) -> dict[tuple[str, int], float]:
        """Configurations other live workers hold -> the probe cost each reserved."""
        c = db.probe_claims.c
        out = self.base.others()
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(c.probe_key, c.result).where(
                    c.study == self.study, c.worker != self.me, self._fresh()
                )
            )
            for key, note in rows:
                machine, _, batch = str(key).rpartition("|")
                out[(machine, int(batch))] = float(json.loads(note or "{}").get("probe_usd", 0))
        return out

    def claim(self, config: tuple[str, int], probe_usd: float) -> bool:
        """True when ``config`` is now this worker's; False when another live worker holds it."""
        c = db.probe_claims.c
        note = json.dumps({"probe_usd": probe_usd})
        values = {"worker": self.me, "created": db.now(self.url), "result": note}
        with self.engine.begin() as conn:  # one claim per worker: its last trial is written
            conn.execute(delete(db.probe_claims).where(self._mine()))
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    insert(db.probe_claims).values(
                        study=self.study, probe_key=_key(config), **values
                    )
                )
            return True
        except IntegrityError:
            pass
        with self.engine.begin() as conn:  # its worker died: ours after ``stale_s``
            taken = conn.execute(
                update(db.probe_claims)
                .where(
                    c.study == self.study,
                    c.probe_key == _key(config),
                    or_(c.worker == self.me, ~self._fresh()),
                )
                .values(**values)
            )
        return taken.rowcount == 1

    def release(self, config: tuple[str, int]) -> None:
        with self.engine.begin() as conn:
            conn.execute(delete(db.probe_claims).where(self._mine(config)))

    def done(self, config: tuple[str, int]) -> None:
        self.release(config)


def _key(config: tuple[str, int]) -> str:
    return f"{config[0]}|{config[1]}"


def run_trials(
    storage: str,
    request: dict[str, Any],
    n_trials: int,
    worker_index: int = 0,
    stale_s: float = GRACE_S,
    backend: str | None = None,
) -> WorkerStats:
    """Join the study of ``request`` (its ``study_name`` is required) and add ``n_trials``;
    ``backend`` scores them (``replay:PATH.json``; None: local probes, as ``advisor
    suggest``). A run ends where ``advisor suggest`` ends (converged, every configuration
    tried); the worker then runs again, and as ``advisor suggest --trials N`` on a stopped
    study the trials beyond the stop explore hyperparameters on the best configurations. It
    stops early when a run adds nothing (every configuration busy, the probe budget spent)."""
    if not request.get("study_name"):
        raise AdvisorError("Joining a study needs its name.", "pass study_name in the request.")
    stats = WorkerStats()
    steps = [0]  # trials begun by the run now going (its progress)

    def progress(phase: str, done: int, _total: int) -> None:
        if phase == "trials":
            steps[0] = done

    def claims(optuna_storage: Any, study: Any) -> TableClaims:
        return TableClaims(storage, optuna_storage, study, stale_s)

    def policy(call: Any) -> Any:
        return retry_transient(call, WRITE_RETRY_S)

    outages = 0
    with api.retrying_writes(policy):
        while stats.trials < n_trials:
            steps[0] = 0
            try:
                run = dict(request, trials=n_trials - stats.trials)
                outcome = api.join_study(run, storage, claims, progress, worker_index, backend)
            except Exception as exc:  # the database restarted or is unreachable: wait, go on
                if not is_storage_error(exc):
                    raise
                stats.trials += steps[0]
                outages += 1
                if outages > MAX_OUTAGES:
                    raise AdvisorError(
                        f"The storage failed {outages} times ({describe(exc)}).",
                        "check that the database is up; finished trials are kept.",
                    ) from exc
                log.warning("worker: %s; resuming in 2 s", describe(exc))
                time.sleep(2.0)
                continue
            stats.trials += outcome.new_trials
            stats.probes_run += outcome.new_probes
            if outcome.new_trials == 0:
                break  # nothing to add now: every configuration busy, or the budget spent
    return stats
