"""The trial record: what one trial of an advisor study stores, and the one place that knows how.

Every trial of an advisor study keeps its machine and batch size (and hyperparameters) as Optuna
params, and the rest as user attributes. ``TrialRecord.to_attrs()`` writes those attributes and
``TrialRecord.from_trial()`` reads them back; nothing else in ``advisor`` indexes
``trial.user_attrs`` for them. The attribute keys are the stored format: old studies must still
load, so the keys below are kept as they were (``tests/advisor/test_records.py`` pins them).

Attributes of an evaluated trial (``source`` measured, modelled or replayed)::

    source, price_per_hour, spot, instance, epochs, probe_cost {seconds, charged_usd},
    estimate, phases, probe, runtime_s {value, low, high}, cost_usd {value, low, high},
    feasible (finished trials), pruned_reason (failed or pruned trials)

Since issue #14 ``runtime_s`` and ``cost_usd`` are the whole job's (start-up + training) and
``estimate["overheads"]`` keeps the terms: each start-up term (phase, seconds, billed, status
documented/prior, source), the billing rule, ``startup_s``, ``training_s``, ``job_billed_s``
(each {value, low, high}); a record without it was priced on its training alone.

A trial imported from a managed tuning job (``source`` managed) stores instead::

    source, provider, tuning_job, managed_job, managed_metric {name, value}, managed_status,
    instance_type, billable_s, price_per_hour, epochs, runtime_s, cost_usd

A short accuracy trial of ``advisor suggest --tune`` (issue #29) stores one attribute,
``accuracy_trial`` (``ACCURACY``: its plan, role, seed, metric and learning curve; read by
``advisor.accuracy.trials``), and no ``source``: it is no machine trial, so
``TrialRecord.from_trial`` gives None for it and the machine search skips it
(``is_accuracy_trial``). Its params are ``batch_size`` and the hyperparameters it trained with;
its intermediate values are the validation metric it reported every fraction of an epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from advisor.evaluation.contract import Evaluation, FailedEvaluation, Scored
from advisor.intervals import Interval
from advisor.probes.result import PhaseTimes

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial


SOURCES = (
    "measured", "modelled", "replayed", "managed",
    # issue #14: measured on the machine by a remote probe, or its emulation here
    "measured (remote probe)", "emulated (local stand-in)",
)  # fmt: skip

# The stored attribute keys (the format). Renaming one breaks old studies: add, never rename.
SOURCE = "source"
PRICE = "price_per_hour"
SPOT = "spot"
INSTANCE = "instance"
EPOCHS = "epochs"
PROBE_COST = "probe_cost"
ESTIMATE = "estimate"
PHASES = "phases"
PROBE = "probe"
RUNTIME = "runtime_s"
COST = "cost_usd"
FEASIBLE = "feasible"
ERROR = "pruned_reason"
PROVIDER = "provider"
TUNING_JOB = "tuning_job"
MANAGED_JOB = "managed_job"
MANAGED_METRIC = "managed_metric"
MANAGED_STATUS = "managed_status"
INSTANCE_TYPE = "instance_type"
BILLABLE = "billable_s"
ACCURACY = "accuracy_trial"  # issue #29: a short accuracy trial's record (advisor.accuracy)

EVALUATED_KEYS: tuple[str, ...] = (
    SOURCE,
    PRICE,
    SPOT,
    INSTANCE,
    EPOCHS,
    PROBE_COST,
    ESTIMATE,
    PHASES,
    PROBE,
)
EVALUATED_KEYS += (RUNTIME, COST)
MANAGED_KEYS: tuple[str, ...] = (
    SOURCE,
    PROVIDER,
    TUNING_JOB,
    MANAGED_JOB,
    MANAGED_METRIC,
    MANAGED_STATUS,
)
MANAGED_KEYS += (INSTANCE_TYPE, BILLABLE, PRICE, SPOT, EPOCHS, RUNTIME, COST)


@dataclass(frozen=True)
class ManagedRun:
    """A training job of a managed tuning job, as imported into the study."""

    provider: str
    tuning_job: str
    job_name: str
    metric_name: str
    metric: float | None
    status: str
    instance_type: str | None
    billable_s: float | None


@dataclass(frozen=True)
class TrialRecord:
    """What a trial stores besides its params: run time and cost (intervals), how they were
    obtained (``source``), the price and the probe behind them.

    ``runtime`` and ``cost`` are both set on a finished evaluation and both None on a failed
    one (``error`` says why); a managed trial may lack a cost when its price is unknown.
    """

    machine: str
    batch_size: int
    source: str  # measured | modelled | replayed | managed
    price_per_hour: float | None
    spot: bool
    epochs: int | None
    runtime: Interval | None
    cost: Interval | None
    instance: dict[str, Any] | None = None
    probe_seconds: float = 0.0
    probe_charged_usd: float = 0.0
    estimate: dict[str, Any] = field(default_factory=dict)
    phases: PhaseTimes | None = None
    probe: dict[str, Any] | None = None
    error: str | None = None
    feasible: bool | None = None
    managed: ManagedRun | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, but got {self.source!r}")
        if (self.managed is not None) != (self.source == "managed"):
            raise ValueError(
                "a managed record (source 'managed') needs its ManagedRun, and only it"
            )
        if self.managed is None and (self.runtime is None) != (self.cost is None):
            raise ValueError("runtime and cost are both set (finished) or both None (failed)")

    @property
    def ok(self) -> bool:
        """A finished evaluation: run time and cost are known."""
        return self.runtime is not None and self.cost is not None

    # -- writing ---------------------------------------------------------------------------

    def to_attrs(self) -> dict[str, Any]:
        """The trial's user attributes (JSON-able), keys as stored since the first release."""
        if self.managed is not None:
            return self._managed_attrs(self.managed)
        attrs: dict[str, Any] = {
            SOURCE: self.source,
            PRICE: self.price_per_hour,
            SPOT: self.spot,
            INSTANCE: self.instance,
            EPOCHS: self.epochs,
            PROBE_COST: {"seconds": self.probe_seconds, "charged_usd": self.probe_charged_usd},
            ESTIMATE: self.estimate,
            PHASES: self.phases.to_dict() if self.phases else None,
            PROBE: self.probe,
            RUNTIME: self.runtime.to_dict() if self.runtime else None,
            COST: self.cost.to_dict() if self.cost else None,
        }
        if self.feasible is not None:
            attrs[FEASIBLE] = self.feasible
        if self.error is not None:
            attrs[ERROR] = self.error
        return attrs

    def _managed_attrs(self, m: ManagedRun) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            SOURCE: "managed",
            PROVIDER: m.provider,
            TUNING_JOB: m.tuning_job,
            MANAGED_JOB: m.job_name,
            MANAGED_METRIC: {"name": m.metric_name, "value": m.metric},
            MANAGED_STATUS: m.status,
            INSTANCE_TYPE: m.instance_type,
            BILLABLE: m.billable_s,
            PRICE: self.price_per_hour,
            SPOT: self.spot,  # the capacity tier that ran (spot or on demand)
            EPOCHS: self.epochs,
        }
        if self.runtime is not None:
            attrs[RUNTIME] = self.runtime.to_dict()
        if self.cost is not None:
            attrs[COST] = self.cost.to_dict()
        if self.feasible is not None:
            attrs[FEASIBLE] = self.feasible
        return attrs

    # -- reading ---------------------------------------------------------------------------

    @classmethod
    def from_trial(cls, trial: FrozenTrial) -> TrialRecord | None:
        """The record a trial stored; None for a trial without one (e.g. pruned before
        evaluation, or not written by advisor)."""
        ua = trial.user_attrs
        if SOURCE not in ua or "machine" not in trial.params or "batch_size" not in trial.params:
            return None
        return cls.from_attrs(str(trial.params["machine"]), int(trial.params["batch_size"]), ua)

    @classmethod
    def from_attrs(cls, machine: str, batch_size: int, ua: dict[str, Any]) -> TrialRecord:
        """The record from a trial's params ``machine``/``batch_size`` and its user attrs."""
        source = str(ua[SOURCE])
        managed = None
        if source == "managed":
            metric = ua.get(MANAGED_METRIC) or {}
            managed = ManagedRun(
                provider=str(ua.get(PROVIDER, "")),
                tuning_job=str(ua.get(TUNING_JOB, "")),
                job_name=str(ua.get(MANAGED_JOB, "")),
                metric_name=str(metric.get("name", "")),
                metric=_float_or_none(metric.get("value")),
                status=str(ua.get(MANAGED_STATUS, "")),
                instance_type=ua.get(INSTANCE_TYPE),
                billable_s=_float_or_none(ua.get(BILLABLE)),
            )
        probe_cost = ua.get(PROBE_COST) or {}
        epochs = ua.get(EPOCHS)
        return cls(
            machine=machine,
            batch_size=batch_size,
            source=source,
            price_per_hour=_float_or_none(ua.get(PRICE)),
            spot=bool(ua.get(SPOT, False)),
            epochs=None if epochs is None else int(epochs),
            runtime=Interval.from_dict(ua[RUNTIME]) if ua.get(RUNTIME) else None,
            cost=Interval.from_dict(ua[COST]) if ua.get(COST) else None,
            instance=ua.get(INSTANCE),
            probe_seconds=float(probe_cost.get("seconds", 0.0)),
            probe_charged_usd=float(probe_cost.get("charged_usd", 0.0)),
            estimate=dict(ua.get(ESTIMATE) or {}),
            phases=PhaseTimes.from_dict(ua[PHASES]) if ua.get(PHASES) else None,
            probe=ua.get(PROBE),
            error=ua.get(ERROR),
            feasible=None if ua.get(FEASIBLE) is None else bool(ua[FEASIBLE]),
            managed=managed,
        )

    # -- to and from the scorer's Evaluation ----------------------------------------------

    @classmethod
    def from_evaluation(
        cls,
        ev: Scored,
        *,
        instance: dict[str, Any] | None,
        charged_usd: float,
        feasible: bool | None = None,
    ) -> TrialRecord:
        """The record of a scored candidate; ``charged_usd`` is what its probe cost the
        study's probe budget (0 when its (machine, batch) was already charged)."""
        return cls(
            machine=ev.machine,
            batch_size=ev.batch_size,
            source=ev.source,
            price_per_hour=ev.price_per_hour,
            spot=ev.spot,
            epochs=ev.epochs,
            runtime=ev.runtime if isinstance(ev, Evaluation) else None,
            cost=ev.cost if isinstance(ev, Evaluation) else None,
            instance=instance,
            probe_seconds=ev.probe_s,
            probe_charged_usd=charged_usd,
            estimate=ev.estimate,
            phases=ev.phases,
            probe=ev.probe.to_dict() if ev.probe else None,
            error=ev.error,
            feasible=feasible if ev.ok else None,
        )

    def to_evaluation(self) -> Scored:
        """The evaluation this record was written from (the probe stays a dict: not rebuilt)."""
        common: dict[str, Any] = {
            "machine": self.machine,
            "batch_size": self.batch_size,
            "source": self.source,
            "epochs": self.epochs or 0,
            "price_per_hour": self.price_per_hour or 0.0,
            "spot": self.spot,
            "probe_s": self.probe_seconds,
            "estimate": dict(self.estimate),
            "phases": self.phases,
        }
        if self.ok and self.runtime is not None and self.cost is not None:
            return Evaluation(runtime=self.runtime, cost=self.cost, **common)
        return FailedEvaluation(error=self.error or "probe failed", **common)


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def is_managed(trial: FrozenTrial) -> bool:
    """Whether a trial was imported from a managed tuning job (with or without machine params)."""
    return trial.user_attrs.get(SOURCE) == "managed"


def managed_job(trial: FrozenTrial) -> str | None:
    """The managed training job a trial was imported from (None for other trials)."""
    job = trial.user_attrs.get(MANAGED_JOB)
    return None if job is None else str(job)


def is_accuracy_trial(trial: FrozenTrial) -> bool:
    """Whether a trial is a short accuracy trial of ``suggest --tune`` (issue #29): it judges
    hyperparameters, never a machine, so the machine search, its ranking and its re-run rule
    leave it out."""
    return ACCURACY in trial.user_attrs
