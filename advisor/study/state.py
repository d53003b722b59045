"""What a study already knows, read back from the storage: evaluated configurations, the
probe money spent, failed probes. Refreshed before each trial, so processes sharing the study
see each other's finished trials (and the sampler learns from them)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from advisor.evaluation.contract import Scored
from advisor.evaluation.failures import TRANSIENT_FAILURES
from advisor.providers.catalog import MachineKey
from advisor.records import TrialRecord, is_accuracy_trial
from advisor.remote.rules import recorded_spend

if TYPE_CHECKING:
    import optuna

Config = tuple[str, int]


class StudyState:
    """Finished trials of ``study`` as the loop needs them; ``work`` is rebuilt from them
    when another process has written trials (the in-memory copy the sampler reads)."""

    def __init__(self, study: optuna.Study, sampler: Any, directions: list[Any]) -> None:
        import datetime

        self.study = study
        # A transient probe failure (TRANSIENT_FAILURES) written before this run is not "done":
        # the next run retries it, as the probe cache does.
        self.since = datetime.datetime.now()
        self._sampler = sampler
        self._directions = directions
        self.done: dict[Config, Scored] = {}
        self.charged: set[Config] = set()
        self.spent_usd = 0.0
        self.retrying = 0
        self.tried: Counter[Config] = Counter()
        self.failures: dict[int, tuple[str, str]] = {}  # batch -> (status, reason) of a probe
        self.finished = 0  # finished trials in the storage, as last read
        self.written = 0  # of which this process wrote since the last read
        self.work: optuna.Study | None = None
        self.refresh()

    def refresh(self) -> None:
        """Re-read the finished trials; rebuild ``work`` if someone else added any."""
        import optuna

        trials = [  # issue #29: short accuracy trials judge no machine: left out
            t
            for t in self.study.get_trials(deepcopy=False)
            if t.state.is_finished() and not is_accuracy_trial(t)
        ]
        foreign = len(trials) != self.finished + self.written
        self.finished, self.written = len(trials), 0
        self.done, self.charged, self.spent_usd = {}, set(), 0.0
        self.tried = Counter[Config]()  # evaluated trials per config
        self.retrying = 0  # transient failures of earlier runs, to be tried again
        for t in trials:
            rec = TrialRecord.from_trial(t)
            if rec is None:
                continue
            if rec.source != "managed":
                self.spent_usd += rec.probe_charged_usd
                self.charged.add((MachineKey(rec.machine).base, rec.batch_size))
                probe = rec.probe or {}
                status = str(probe.get("status", "ok"))
                if (
                    status in TRANSIENT_FAILURES
                    and (t.datetime_complete or self.since) < self.since
                ):
                    self.retrying += 1
                    continue  # retried by this run
                if status != "ok":
                    reason = str(probe.get("error") or rec.error or "no detail")
                    self.failures.setdefault(rec.batch_size, (status, reason))
            self.done[(rec.machine, rec.batch_size)] = rec.to_evaluation()
            self.tried[(rec.machine, rec.batch_size)] += 1
        # Issue #14: remote probes of ``--cloud-probes`` spent real money from the same budget,
        # and a trial of a machine and batch they measured pays no probe again.
        cloud_usd, cloud_measured = recorded_spend(self.study.user_attrs)
        self.spent_usd += cloud_usd
        self.charged |= cloud_measured
        if self.work is None or foreign:
            self.work = optuna.create_study(directions=self._directions, sampler=self._sampler)
            self.work.add_trials(trials)

    def wrote(self, config: Config, ev: Scored | None, charged_usd: float = 0.0) -> None:
        """Account for a trial this process has just written (no re-read needed)."""
        self.written += 1
        if ev is not None:
            self.done[config] = ev
            self.tried[config] += 1
            self.charged.add((MachineKey(config[0]).base, config[1]))
            self.spent_usd += charged_usd
