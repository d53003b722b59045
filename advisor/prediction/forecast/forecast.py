"""Forecast a run on several machines from one probe: predicted phases, runtime and cost
(with intervals), ranked, plus the epoch sweep normalised by its best machine.

``forecast_machine`` is the one prediction path (issues #26, #27): ``advisor predict``,
``advisor estimate --instances``, ``advisor.predict``, the scorer inside ``advisor suggest``
(``advisor.evaluation.local.LocalBackend``) and the service's ``/predict`` all call it, on the
same traced probe. It predicts the machine's phases (``timing.model.predict``) and prices the
whole job once -- the machine's start-up terms (the service's priors, or a remote probe job's
measured start-up) plus the training, billed by the service's rule -- for the chosen epochs
and for every epoch count of the sweep. Issue #34: each accelerator row carries its step's
memory per device against the device's (``memory.device``), so every path reads the
same fit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from advisor.errors import AdvisorError
from advisor.intervals import Interval
from advisor.prediction.memory.device import DeviceMemory, machine_memory
from advisor.prediction.run.iteration_model import (
    DEFAULT_EPOCHS,
    Estimate,
    epoch_sweep,
    estimate,
    normalise,
)
from advisor.prediction.step.machine_plan import machine_plan
from advisor.prediction.step.placement import place
from advisor.prediction.step.plan import PrecisionLacking, TrainingPlan
from advisor.prediction.step.traces import TraceStore
from advisor.prediction.timing.model import AcceleratorLookup, predict
from advisor.prediction.timing.types import Prediction
from advisor.probes.result import ProbeResult
from advisor.providers.catalog import InstanceType
from advisor.providers.overheads import RunOverheads, run_overheads
from advisor.providers.pricing import PricedRun, price_run


@dataclass(frozen=True)
class Forecast:
    """One machine's prediction and the run it implies (``estimate`` at the chosen epochs,
    ``sweep`` at several epoch counts), plus what a real job adds (``overheads``: start-up
    terms and billing granularity of the machine's service, providers/overheads.py) and the
    whole job priced by the one pricing path (``job``: the same numbers ``advisor suggest``
    scores)."""

    machine: InstanceType
    price_per_hour: float
    prediction: Prediction
    estimate: Estimate
    sweep: dict[int, Estimate]
    overheads: RunOverheads | None = None
    job: PricedRun | None = None
    # Issue #34: the step's memory per device against the accelerator's (None: no accelerator)
    memory: DeviceMemory | None = None
    # The training run alone at the chosen epochs, on demand (what the job is priced from and
    # what ``advisor suggest`` scores): estimated once per row (issue #46)
    training: Estimate | None = None
    nodes: int = 1  # issue #49: machines of this type joined by their network

    @property
    def fits(self) -> bool:
        """True when the step's upper estimate fits the device's usable memory, or the row has
        no device to fit (this machine); an unknown memory never fits (issue #45: its text
        says "memory unknown"; such a row is shown, never recommended)."""
        return self.memory is None or self.memory.fits is True

    @property
    def memory_unknown(self) -> bool:
        """Whether the row's memory could not be told (its time and cost still can)."""
        return self.memory is not None and self.memory.fits is None

    @property
    def job_wall_s(self) -> Interval | None:
        """Seconds from submission to the end: start-up terms + the training run."""
        return None if self.job is None else self.job.runtime

    @property
    def job_cost_usd(self) -> Interval | None:
        """USD billed: billed start-up terms + training, rounded to the service's billing."""
        return None if self.job is None else self.job.cost

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine.key,
            "accelerator": self.machine.accelerator,
            "accelerators": self.machine.accelerator_count,
            "price_per_hour": self.price_per_hour,
            "prediction": self.prediction.to_dict(),
            "estimate": self.estimate.to_dict(),
            "sweep": {str(n): e.to_dict() for n, e in self.sweep.items()},
            "overheads": None if self.job is None else self.job.notes().get("overheads"),
            "memory": None if self.memory is None else self.memory.to_dict(),
            "fits": self.fits,
            **({"nodes": self.nodes} if self.nodes > 1 else {}),
        }


def forecast_machine(
    probe: ProbeResult,
    machine: InstanceType,
    catalog: AcceleratorLookup,
    batch_size: int,
    epochs: int,
    n_train: int,
    n_val: int,
    *,
    spot: bool = False,
    strategy: str | None = None,
    sweep_epochs: Sequence[int] = DEFAULT_EPOCHS,
    data_bytes: float = 0.0,
    data_basis: str = "",
    overheads: RunOverheads | None = None,
    ledger_storage: str | None = None,
    trace_store: TraceStore | None = None,
    plan: TrainingPlan | None = None,
    precision: str | None = None,
    nodes: int = 1,
    fit: bool = True,
) -> Forecast:
    """One machine's prediction and its whole job, priced: the start-up terms (``overheads``,
    e.g. a remote probe's measured start-up; default the service's, with ``data_bytes``
    downloaded) plus the training, billed once, at ``epochs`` and over the sweep. ``plan``:
    how the machine's GPUs train (issue #35); or ``precision`` (auto, fp32, tf32, bf16,
    fp16): its plan for that precision, a ``PrecisionLacking`` error when its GPU lacks it.
    ``nodes`` > 1 (issue #49): that many machines of the type under torchrun, at N times the
    price, the slowest of N start-ups and N times the spot interruptions
    (``advisor.prediction.timing.nodes``). ``fit=False``: the time and price alone (the plan
    search orders its plans by them before tracing their memory; ``memory`` is None)."""
    if plan is None and precision not in (None, "fp32"):
        plan, lacking = machine_plan(machine, catalog, str(precision))
        if lacking:
            raise PrecisionLacking(f"left out: {lacking}.", "use --precision auto or fp32.")
    if spot and machine.spot_usd_per_h is None:
        raise AdvisorError(
            f"{machine.key} has no spot price in this catalog snapshot.",
            "drop --spot or remove that machine.",
        )
    from advisor.prediction.timing import nodes as many

    price = machine.price(spot) * max(nodes, 1)
    at = place(machine, batch_size, plan, nodes)  # the one split of the batch: time, memory
    pred = predict(probe, machine, catalog, batch_size, strategy=strategy,
                   ledger_storage=ledger_storage, trace_store=trace_store,
                   placement=at)  # fmt: skip
    over = overheads if overheads is not None else run_overheads(machine, data_bytes, data_basis)
    over = many.cluster_overheads(over, nodes)
    counts = sorted({*sweep_epochs, epochs})
    sweep = epoch_sweep(
        pred.phases, n_train, n_val, batch_size, counts, price,
        spot=spot, service=machine.service, overheads=over,
    )  # fmt: skip
    training = estimate(pred.phases, n_train, n_val, epochs, batch_size)  # on demand
    train = many.spot_training(training.runtime, nodes) if spot else training.runtime
    job = price_run(train, price, spot=spot, service=machine.service, overheads=over)
    memory = (
        machine_memory(probe, machine, catalog, batch_size, trace_store, placement=at)
        if fit
        else None
    )
    return Forecast(machine, price, pred, sweep[epochs], sweep, over, job, memory, training,
                    nodes)  # fmt: skip


def forecast(
    probe: ProbeResult,
    machines: Iterable[InstanceType],
    catalog: AcceleratorLookup,
    batch_size: int,
    epochs: int,
    n_train: int,
    n_val: int,
    spot: bool = False,
    strategy: str | None = None,
    sweep_epochs: Sequence[int] = DEFAULT_EPOCHS,
    data_bytes: float = 0.0,
    data_basis: str = "",
    overheads: Mapping[str, RunOverheads] | None = None,
    ledger_storage: str | None = None,
    trace_store: TraceStore | None = None,
    plans: Mapping[str, TrainingPlan | Sequence[TrainingPlan]] | None = None,
    nodes: int = 1,
) -> list[Forecast]:
    """``forecast_machine`` for each machine (``overheads`` by machine key, where measured;
    ``plans``: the training plan by machine key, default float32, or several to choose from:
    the fastest that fits, issue #50's ``--precision auto``); sorted by the job's wall time,
    the rows that fit their devices' memory first."""
    rows = []
    for m in machines:
        given = (plans or {}).get(m.key)
        choices: list[TrainingPlan | None] = []
        if isinstance(given, TrainingPlan) or given is None:
            choices.append(given)
        else:
            choices.extend(given)
        found = [
            forecast_machine(
                probe, m, catalog, batch_size, epochs, n_train, n_val, spot=spot,
                strategy=strategy, sweep_epochs=sweep_epochs, data_bytes=data_bytes,
                data_basis=data_basis, overheads=(overheads or {}).get(m.key),
                ledger_storage=ledger_storage, trace_store=trace_store, plan=plan, nodes=nodes,
            )
            for plan in choices
        ]  # fmt: skip
        fitting = [f for f in found if f.fits]
        rows.append(min(fitting, key=_wall) if fitting else found[-1])
    rows.sort(key=lambda f: (not f.fits, _wall(f)))
    return rows


def _wall(f: Forecast) -> float:
    return (f.job_wall_s or f.estimate.runtime).value


def normalised_tables(rows: Sequence[Forecast]) -> dict[str, dict[str, dict[int, float]]]:
    """Runtime and cost per epoch count, each column divided by its best machine (rows that
    do not fit their devices' memory left out)."""
    rows = [f for f in rows if f.fits]
    runtime = {f.machine.key: {n: e.runtime.value for n, e in f.sweep.items()} for f in rows}
    cost = {
        f.machine.key: {n: e.cost.value for n, e in f.sweep.items() if e.cost is not None}
        for f in rows
    }
    return {"runtime": normalise(runtime), "cost": normalise(cost)}
