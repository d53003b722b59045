"""The iteration-time model (docs/method.md section 3): from a probe's phases to a full run.

Notation: ``init`` initialisation, ``t1`` first iteration, ``t2`` steady iteration, ``v1``/``v2``
first and second validation passes, ``N_it = ceil(n_train / batch_size)``, ``N_ep`` epochs.

- iteration-based, with validation:
  ``T = init + [t1 + (N_it - 1) t2 + v1] + (N_ep - 1) [N_it t2 + v2]``
- iteration-based, without validation: ``T = init + t1 + (N_ep N_it - 1) t2``
- epoch-based (two measured epochs): ``T = init + epoch1 + (N_ep - 1) epoch2``
- cost: ``T * price_per_hour / 3600``, billed and with the spot overhead by
  ``advisor.providers.pricing`` (the one pricing path, via :func:`priced`)

``t2`` is the median of iterations 2..k (robust to the odd slow step of a shared machine); its
interval is a seeded bootstrap (90 %) of that median, drawn in fixed memory however many
iterations a probe file holds (:func:`bootstrap_medians`). A phase measured once (init, t1, v1, v2)
has no spread of its own: it gets the relative noise seen in the steady iterations (their
interquartile range over their median), at least :data:`SINGLE_SAMPLE_MIN_REL`. The runtime's
interval adds the terms' bounds (errors taken as fully correlated, the conservative choice),
so the ``N_ep N_it`` multiplier makes ``t2``'s uncertainty dominate long runs, and ``t1``'s
(with ``init``) short ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from advisor.intervals import Interval
from advisor.probes.result import PhaseTimes, ProbeResult, Source

if TYPE_CHECKING:
    from advisor.providers.pricing import StartUp

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_LEVEL = 0.90
# Issue #50: resamples x samples drawn as a matrix at most (32 MiB); a larger sample's medians
# come from its order statistics (2000 x 1,000,000 iteration times had reached 18.4 GB).
BOOTSTRAP_CELLS = 2**22
SINGLE_SAMPLE_MIN_REL = 0.05  # relative half-width given to a phase measured only once
DEFAULT_EPOCHS = (5, 10, 20)


def median_interval(samples: Iterable[float], seed: int = 0) -> Interval:
    """The median of ``samples`` with a seeded bootstrap percentile interval (90 %)."""
    values = np.asarray(list(samples), dtype=float)
    if values.size == 0:
        raise ValueError("need at least one sample, but got none")
    med = float(np.median(values))
    if values.size == 1:
        return Interval.exact(med)
    rng = np.random.default_rng(seed)
    if values.size * BOOTSTRAP_RESAMPLES <= BOOTSTRAP_CELLS:
        draws = rng.choice(values, size=(BOOTSTRAP_RESAMPLES, values.size), replace=True)
        boot = np.median(draws, axis=1)
    else:
        boot = bootstrap_medians(values, BOOTSTRAP_RESAMPLES, rng)
    tail = (1.0 - BOOTSTRAP_LEVEL) / 2.0
    low, high = np.quantile(boot, [tail, 1.0 - tail])
    return Interval(med, min(float(low), med), max(float(high), med))


def bootstrap_medians(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The medians of ``resamples`` bootstrap resamples of ``values`` (n draws with
    replacement each), drawn without the resamples: the same distribution in O(n) memory.

    A resample is n indices ``floor(n U_i)`` of the sorted values, U_i uniform on (0, 1), so
    its k-th smallest value is ``sorted[floor(n U_(k))]``, where U_(k), the k-th smallest of
    n uniforms, is Beta(k, n + 1 - k). Its median is that value at k = (n + 1) / 2 for odd
    n; for even n the mean of k = n / 2 and k + 1, where U_(k+1) = U_(k) + (1 - U_(k)) V and
    V ~ Beta(1, n - k) (the smallest of the n - k uniforms above U_(k))."""
    ordered = np.sort(np.asarray(values, dtype=float))
    n = ordered.size
    k = (n + 1) // 2 if n % 2 else n // 2
    low = rng.beta(k, n + 1 - k, size=resamples)

    def at(u: np.ndarray) -> np.ndarray:
        return ordered[np.minimum((u * n).astype(np.int64), n - 1)]

    if n % 2:
        return at(low)
    high = low + (1.0 - low) * rng.beta(1, n - k, size=resamples)
    return (at(low) + at(high)) / 2.0


def relative_spread(samples: Iterable[float]) -> float:
    """Interquartile range over median: the run-to-run noise level of a timing."""
    values = np.asarray(list(samples), dtype=float)
    if values.size < 2:
        return 0.0
    med = float(np.median(values))
    q1, q3 = np.quantile(values, [0.25, 0.75])
    return float(q3 - q1) / med if med > 0 else 0.0


def _single(value: float, rel: float) -> Interval:
    """``value`` with its relative spread ``rel`` as a factor either way, value / (1 + rel) to
    value x (1 + rel): on a busy machine the steady iterations' spread can pass 100 %, and a
    time's low end at value x (1 - rel) would reach 0 s, which no phase takes."""
    value = max(value, 0.0)
    return Interval(value, value / (1.0 + rel), value * (1.0 + rel))


def init_for_size(probe: ProbeResult, n_train: int | None, n_val: int | None) -> float:
    """The probe's initialisation with its data preparation rescaled to ``n_train + n_val``
    samples (linear in the sample count); unchanged when the probe did not time its data."""
    if probe.data_s is None or not probe.data_samples or n_train is None:
        return probe.init_s
    rate = probe.data_s / probe.data_samples
    n_val = probe.n_val if n_val is None else n_val
    return max(0.0, probe.init_s + rate * ((n_train + n_val) - (probe.n_train + probe.n_val)))


def phase_times(
    probe: ProbeResult, n_train: int | None = None, n_val: int | None = None
) -> PhaseTimes:
    """The measured phases of an ok probe: ``t2`` = median of iterations 2..k with a
    bootstrap interval; single-sample phases get the steady iterations' relative spread.

    Given ``n_train``/``n_val`` other than the probe's, the data-preparation part of
    initialisation is rescaled to them (see :func:`init_for_size`), and the validation passes
    to ``n_val`` (``v1``'s warm-up extra over ``v2`` is kept once)."""
    if not probe.ok:
        raise ValueError(f"cannot use a failed probe (status={probe.status}): {probe.error}")
    steady = probe.iteration_s[1:]
    t2 = median_interval(steady)
    rel = max(SINGLE_SAMPLE_MIN_REL, relative_spread(steady))
    passes = probe.validation_s
    v1 = passes[0] if passes else 0.0
    v2 = passes[1] if len(passes) > 1 else v1
    if n_val is not None and probe.n_val > 0 and n_val != probe.n_val:
        # Validation passes scale with the validation set; v1's warm-up extra does not.
        factor = n_val / probe.n_val
        v1, v2 = max(v1 - v2, 0.0) + v2 * factor, v2 * factor
    note = (
        f"t2 = median of iterations 2..{len(probe.iteration_s)} "
        f"(bootstrap {BOOTSTRAP_LEVEL:.0%}); single-sample phases +-{rel:.1%}"
    )
    if probe.validation_scale != 1.0:
        note += (
            f"; validation scaled x{probe.validation_scale:.2f} from "
            f"{probe.validation_samples_measured} measured samples"
        )
    return PhaseTimes(
        init=_single(init_for_size(probe, n_train, n_val), rel),
        t1=_single(probe.iteration_s[0], rel),
        t2=t2,
        v1=_single(v1, rel),
        v2=_single(v2, rel),
        source="measured",
        note=note,
    )


@dataclass(frozen=True)
class Estimate:
    """A full run's predicted runtime (s) and cost (USD), each with an interval.

    ``breakdown`` gives the central value of each term in seconds (``init``,
    ``first_iteration``, ``steady_iterations``, ``validation`` for the iteration-based
    formulas; ``init``, ``first_epoch``, ``later_epochs`` for the epoch-based one).
    ``source`` says whether the phases were measured on the machine or modelled for it.
    """

    runtime: Interval
    cost: Interval | None
    breakdown: dict[str, float]
    source: Source
    epochs: int
    iterations_per_epoch: int | None
    batch_size: int | None = None
    n_train: int | None = None
    n_val: int | None = None
    formula: str = "iteration, with validation"
    price_per_hour: float | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.epochs <= 0:
            raise ValueError(f"epochs must be > 0, but got {self.epochs}")
        if self.runtime.low < 0:
            raise ValueError(f"runtime must be >= 0, but got {self.runtime}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "runtime_s": self.runtime.to_dict(),
            "cost_usd": self.cost.to_dict() if self.cost is not None else None,
            "breakdown": dict(self.breakdown),
            "source": self.source,
            "epochs": self.epochs,
            "iterations_per_epoch": self.iterations_per_epoch,
            "batch_size": self.batch_size,
            "n_train": self.n_train,
            "n_val": self.n_val,
            "formula": self.formula,
            "price_per_hour": self.price_per_hour,
            "note": self.note,
            **({"extra": dict(self.extra)} if self.extra else {}),
        }


def _check_sizes(n_train: int, n_val: int, epochs: int, batch_size: int) -> None:
    if n_train <= 0 or n_val < 0 or epochs <= 0 or batch_size <= 0:
        raise ValueError(
            "need n_train > 0, n_val >= 0, epochs > 0 and batch_size > 0, but got "
            f"n_train={n_train}, n_val={n_val}, epochs={epochs}, batch_size={batch_size}"
        )


def _combine(terms: Mapping[str, tuple[float, Interval]]) -> tuple[Interval, dict[str, float]]:
    """Sum ``multiplier * interval`` terms; bounds add (fully correlated errors)."""
    value = low = high = 0.0
    breakdown: dict[str, float] = {}
    for name, (mult, phase) in terms.items():
        value += mult * phase.value
        low += mult * phase.low
        high += mult * phase.high
        breakdown[name] = breakdown.get(name, 0.0) + mult * phase.value
    return Interval(value, min(low, value), max(high, value)), breakdown


def priced(
    runtime: Interval,
    price_per_hour: float,
    *,
    spot: bool = False,
    service: str | None = None,
    overheads: StartUp | None = None,
) -> tuple[Interval, Interval, dict[str, Any]]:
    """Run time (start-up + training, with the spot overhead on spot), cost and the pricing
    notes of a run whose on-demand training time is ``runtime``: the one pricing path
    (``advisor.providers.pricing.price_run``) as Intervals. The study's scorer, the report
    and ``advisor predict`` all price here; ``overheads`` (``providers/overheads.py``) are
    the start-up terms of the machine's service (None: training alone)."""
    from advisor.providers.pricing import price_run

    p = price_run(runtime, price_per_hour, spot=spot, service=service, overheads=overheads)
    return p.runtime, p.cost, p.notes()


def _cost(
    runtime: Interval,
    price_per_hour: float | None,
    spot: bool,
    service: str | None,
    overheads: StartUp | None = None,
) -> tuple[Interval, Interval | None, dict[str, Any]]:
    if price_per_hour is None:
        if spot or overheads is not None:
            raise ValueError("spot=True or overheads need a price_per_hour")
        return runtime, None, {}
    return priced(runtime, price_per_hour, spot=spot, service=service, overheads=overheads)


def estimate(
    phases: PhaseTimes | ProbeResult,
    n_train: int,
    n_val: int,
    epochs: int,
    batch_size: int,
    price_per_hour: float | None = None,
    validation: bool = True,
    *,
    spot: bool = False,
    service: str | None = None,
    overheads: StartUp | None = None,
) -> Estimate:
    """Runtime (and cost, given a price in USD/h) of ``epochs`` epochs over ``n_train``
    samples at ``batch_size``, by the iteration-based formula with or without validation.
    ``spot`` (with the spot price) and ``service`` apply the spot restart overhead and the
    service's billing rule (``advisor.providers.pricing``); ``overheads`` add the start-up
    terms (the runtime is then start-up + training, its ``breakdown`` has a ``startup``
    term, and ``extra["overheads"]`` lists them)."""
    if isinstance(phases, ProbeResult):
        phases = phase_times(phases, n_train, n_val)
    _check_sizes(n_train, n_val, epochs, batch_size)
    n_it = math.ceil(n_train / batch_size)
    with_val = validation and n_val > 0
    terms: dict[str, tuple[float, Interval]] = {
        "init": (1.0, phases.init),
        "first_iteration": (1.0, phases.t1),
        "steady_iterations": (float(epochs * n_it - 1), phases.t2),
    }
    if with_val:
        terms["validation"] = (1.0, phases.v1)
        terms["validation_later"] = (float(epochs - 1), phases.v2)
    runtime, breakdown = _combine(terms)
    breakdown["validation"] = breakdown.pop("validation", 0.0) + breakdown.pop(
        "validation_later", 0.0
    )
    runtime, cost, notes = _cost(runtime, price_per_hour, spot, service, overheads)
    if overheads is not None:
        breakdown["startup"] = float(overheads.wall.value)
    return Estimate(
        runtime=runtime,
        cost=cost,
        extra=notes,
        breakdown=breakdown,
        source=phases.source,
        epochs=epochs,
        iterations_per_epoch=n_it,
        batch_size=batch_size,
        n_train=n_train,
        n_val=n_val,
        formula="iteration, with validation" if with_val else "iteration, without validation",
        price_per_hour=price_per_hour,
        note=phases.note,
    )


def estimate_from_epochs(
    init: float | Interval,
    epoch1: float | Interval,
    epoch2: float | Interval,
    epochs: int,
    price_per_hour: float | None = None,
    source: Source = "measured",
) -> Estimate:
    """Epoch-based formula ``T = init + epoch1 + (N_ep - 1) * epoch2`` (two measured epochs)."""
    if epochs <= 0:
        raise ValueError(f"epochs must be > 0, but got {epochs}")

    def as_interval(x: float | Interval) -> Interval:
        return x if isinstance(x, Interval) else Interval.exact(float(x))

    runtime, breakdown = _combine(
        {
            "init": (1.0, as_interval(init)),
            "first_epoch": (1.0, as_interval(epoch1)),
            "later_epochs": (float(epochs - 1), as_interval(epoch2)),
        }
    )
    runtime, cost, notes = _cost(runtime, price_per_hour, False, None)
    return Estimate(
        runtime=runtime,
        cost=cost,
        extra=notes,
        breakdown=breakdown,
        source=source,
        epochs=epochs,
        iterations_per_epoch=None,
        formula="epoch",
        price_per_hour=price_per_hour,
    )


def epoch_sweep(
    phases: PhaseTimes | ProbeResult,
    n_train: int,
    n_val: int,
    batch_size: int,
    epochs: Iterable[int] = DEFAULT_EPOCHS,
    price_per_hour: float | None = None,
    validation: bool = True,
    *,
    spot: bool = False,
    service: str | None = None,
    overheads: StartUp | None = None,
) -> dict[int, Estimate]:
    """The estimate at each epoch count (sorted, duplicates dropped); with ``overheads``,
    each is the whole job (start-up + training)."""
    if isinstance(phases, ProbeResult):
        phases = phase_times(phases, n_train, n_val)
    return {
        n: estimate(
            phases,
            n_train,
            n_val,
            n,
            batch_size,
            price_per_hour,
            validation,
            spot=spot,
            service=service,
            overheads=overheads,
        )
        for n in sorted(set(epochs))
    }


def normalise(table: Mapping[str, Mapping[int, float]]) -> dict[str, dict[int, float]]:
    """Divide each epoch column by its best (smallest) positive value across rows: 1.0 = the
    best, 2.0 = twice as slow or dear. A zero (a free machine's cost: this one) stays 0 -- it
    is no divisor, so the others never become infinite (issue #27) -- and a column of zeros
    stays zeros. Rows missing a column keep it missing."""
    columns: dict[int, float] = {}
    for row in table.values():
        for col, value in row.items():
            if value < 0 or math.isnan(value):
                raise ValueError(f"values must be >= 0, but got {value} in column {col}")
            if value > 0:
                columns[col] = min(columns.get(col, math.inf), value)
    return {
        name: {col: (value / columns[col] if value > 0 else 0.0) for col, value in row.items()}
        for name, row in table.items()
    }
