"""Forecast a run on several machines from one probe: predicted phases, runtime and cost
(with intervals), ranked, plus the epoch sweep normalised by its best machine."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from advisor.probes.iteration_model import DEFAULT_EPOCHS, Estimate, epoch_sweep, normalise
from advisor.probes.perf.model import AcceleratorLookup, predict
from advisor.probes.perf.types import Prediction
from advisor.probes.result import ProbeResult
from advisor.providers.catalog import InstanceType
from advisor.providers.overheads import RunOverheads, Span, run_overheads

from advisor.errors import AdvisorError


@dataclass(frozen=True)
class Forecast:
    """One machine's prediction and the run it implies (``estimate`` at the chosen epochs,
    ``sweep`` at several epoch counts), plus what a real job adds (``overheads``: start-up
    terms and billing granularity of the machine's service, providers/overheads.py)."""

    machine: InstanceType
    price_per_hour: float
    prediction: Prediction
    estimate: Estimate
    sweep: dict[int, Estimate]
    overheads: RunOverheads | None = None

    def _train(self) -> Span:
        rt = self.estimate.runtime
        return Span(rt.value, rt.low, rt.high)

    @property
    def job_wall_s(self) -> Span | None:
        """Seconds from submission to the end: start-up terms + the training run."""
        return None if self.overheads is None else self.overheads.wall + self._train()

    @property
    def job_cost_usd(self) -> Span | None:
        """USD billed: billed start-up terms + training, rounded to the service's billing."""
        if self.overheads is None:
            return None
        return self.overheads.cost(self._train(), self.price_per_hour)

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine.key,
            "accelerator": self.machine.accelerator,
            "accelerators": self.machine.accelerator_count,
            "price_per_hour": self.price_per_hour,
            "prediction": self.prediction.to_dict(),
            "estimate": self.estimate.to_dict(),
            "sweep": {str(n): e.to_dict() for n, e in self.sweep.items()},
            "overheads": None if self.overheads is None else _overheads_dict(self),
        }


def _span(s: Span | None) -> dict[str, float] | None:
    return None if s is None else {"value": s.value, "low": s.low, "high": s.high}


def _overheads_dict(f: Forecast) -> dict[str, Any]:
    over = f.overheads
    assert over is not None
    return {
        "terms": [
            {
                "phase": t.phase,
                "seconds": _span(t.seconds),
                "billed": t.billed,
                "status": t.status,
                "source": t.source,
            }
            for t in over.terms
        ],
        "billing": {
            "increment_s": over.billing.increment_s,
            "minimum_s": over.billing.minimum_s,
            "status": over.billing.status,
            "source": over.billing.source,
        },
        "job_wall_s": _span(f.job_wall_s),
        "job_billed_s": _span(over.billed_run(f._train())),
        "job_cost_usd": _span(f.job_cost_usd),
    }


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
) -> list[Forecast]:
    """Predict each machine and estimate the run; sorted fastest first."""
    rows = []
    for machine in machines:
        if spot and machine.spot_usd_per_h is None:
            raise AdvisorError(
                f"{machine.key} has no spot price in this catalog snapshot.",
                "drop --spot or remove that machine.",
            )
        price = machine.price(spot)
        pred = predict(probe, machine, catalog, batch_size, strategy=strategy)
        counts = sorted({*sweep_epochs, epochs})
        sweep = epoch_sweep(
            pred.phases, n_train, n_val, batch_size, counts, price,
            spot=spot, service=machine.service,
        )  # fmt: skip
        rows.append(Forecast(machine, price, pred, sweep[epochs], sweep, run_overheads(machine)))
    rows.sort(key=lambda f: f.estimate.runtime.value)
    return rows


def normalised_tables(rows: Sequence[Forecast]) -> dict[str, dict[str, dict[int, float]]]:
    """Runtime and cost per epoch count, each column divided by its best machine."""
    runtime = {f.machine.key: {n: e.runtime.value for n, e in f.sweep.items()} for f in rows}
    cost = {
        f.machine.key: {n: e.cost.value for n, e in f.sweep.items() if e.cost is not None}
        for f in rows
    }
    return {"runtime": normalise(runtime), "cost": normalise(cost)}
