"""Epochs to target per batch size from the gradient noise scale (McCandlish et al. 2018).

The paper's model of large-batch training: with the learning rate tuned for each batch size,
the steps and examples needed to reach a given loss obey ``S = S_min (1 + B_noise / B)`` and
``E = E_min (1 + B / B_noise)``. Epochs are examples over the dataset size, so anchored on
one known point ``(B_ref, E_ref)``::

    E(B) = E_ref * (1 + B / B_noise) / (1 + B_ref / B_noise)

``B_noise`` is taken as the probe's ``B_simple`` (:mod:`advisor.probes.gradient_noise`).
The anchor is what the user knows (``--epochs N --at-batch B``), a workload's published
epochs-to-stabilise at one batch size, or a short measured run.

Learning rate: the same model gives the optimal SGD step ``lr(B) = lr_max / (1 + B_noise /
B)``; relative to the anchor's ``lr_ref`` at ``B_ref`` that is :func:`scaled_lr` -- linear
scaling for ``B << B_noise`` (with linear warm-up), flat for ``B >> B_noise``. Adaptive
optimisers (Adam, Adadelta) use square-root scaling capped by the same saturation.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from advisor.probes.gradient_noise import NoiseScale

# "fitted": the model fitted to several known points, at one of them (advisor.prediction.run.epochs_fit)
EpochsSource = Literal["given", "measured", "fitted", "predicted"]

LR_RULE = (
    "lr(B) = lr_ref (1 + B_noise/B_ref) / (1 + B_noise/B) for SGD (linear for B << B_noise, "
    "with linear warm-up over the first epoch; flat beyond); square root of that factor for "
    "adaptive optimisers (Adam, Adadelta)"
)

# What the probe's noise scale misses (docs/benchmarks.md, issue #19): measured at the start
# of training, it is far below its value near convergence, so for long runs larger batches get
# too many epochs; on short runs to a modest target it did well for simple-cnn and gave too
# few for fcn at its largest batch, where training was unstable.
EARLY_NOISE_CAVEAT = (
    "B_noise is measured near the start of training, where it is usually far smaller than "
    "later (medians of 5 seeds after 8 steps: fcn 187 and 1,329, simple-cnn 90 and 54; after "
    "3 epochs: fcn 2,316-7,285, simple-cnn 646-4,810). For runs to convergence the epochs "
    "predicted above the anchor batch are then too many (fcn's published 512-2048: 1.6-4.9x); "
    "on short runs to a modest target they were within 25 % for simple-cnn at batch 32-128 and "
    "11-49 % too few for fcn (-49 % at 128, where training was unstable). A second known point "
    "(--epochs-at B=N) fits the curve instead"
)


@dataclass(frozen=True)
class EpochsAnchor:
    """One known point: ``epochs`` at ``batch_size``, and where it comes from."""

    batch_size: int
    epochs: float
    source: EpochsSource  # "given" (user or published figure) or "measured" (a short run)
    basis: str  # e.g. "--epochs 13 --at-batch 256", "published (docs/method.md 2.3)"

    def __post_init__(self) -> None:
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, but got {self.batch_size}")
        if not self.epochs > 0:
            raise ValueError(f"epochs must be > 0, but got {self.epochs}")


@dataclass(frozen=True)
class EpochsEstimate:
    """Epochs at one batch size: ``epochs`` (whole epochs run), the model's ``value`` with
    its interval, whether given, measured or predicted, and how."""

    batch_size: int
    epochs: int
    value: float
    low: float
    high: float
    source: EpochsSource
    basis: str
    b_noise: float | None = None  # the noise scale used (None: not used; inf: unresolved)
    b_noise_from: str = ""  # "probe" (its B_simple) or "fit" (fitted to known points)
    known: float | None = None  # the given or published figure at this batch size, if any

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.b_noise is not None and not math.isfinite(self.b_noise):
            data["b_noise"] = "inf"
        return data


def epochs_ratio(batch_size: float, b_ref: float, b_noise: float) -> float:
    """``E(B) / E(B_ref) = (1 + B / B_noise) / (1 + B_ref / B_noise)`` (1 when B_noise = inf)."""
    if batch_size <= 0 or b_ref <= 0:
        raise ValueError(f"batch sizes must be > 0, but got {batch_size}, {b_ref}")
    if b_noise <= 0:
        raise ValueError(f"b_noise must be > 0, but got {b_noise}")
    if math.isinf(b_noise):
        return 1.0
    return (1.0 + batch_size / b_noise) / (1.0 + b_ref / b_noise)


def predict_epochs(
    anchor: EpochsAnchor, batch_size: int, noise: NoiseScale | None
) -> EpochsEstimate:
    """Epochs at ``batch_size`` from the anchor and the noise scale; the interval spans the
    noise scale's own interval and ``B_noise = inf`` (the anchor's epochs), because the noise
    scale the probe measures early in training grows later (:data:`EARLY_NOISE_CAVEAT` says
    where that interval was measured to be too narrow).

    At the anchor's batch size the anchor itself is returned; without a noise scale the
    anchor's epochs are used unchanged and marked as given at another batch size.
    """
    e = anchor.epochs
    if batch_size == anchor.batch_size:
        return EpochsEstimate(
            batch_size, math.ceil(e - 1e-9), e, e, e, anchor.source, anchor.basis, known=e
        )
    if noise is None:
        return EpochsEstimate(
            batch_size,
            math.ceil(e - 1e-9),
            e,
            e,
            e,
            "given",
            f"{anchor.basis}, unchanged (no gradient noise scale measured)",
        )
    b_lo = max(noise.low, 1e-9)
    ratios = [
        epochs_ratio(batch_size, anchor.batch_size, b)
        for b in (b_lo, noise.value if noise.value > 0 else b_lo, noise.high)
    ]
    value = e * ratios[1]
    # The noise scale grows during training (docs/benchmarks.md, issue #19): the interval
    # reaches to B_noise = inf (ratio 1, the anchor's epochs) whatever the probe's interval.
    low, high = e * min(*ratios, 1.0), e * max(*ratios, 1.0)
    basis = (
        f"E({anchor.batch_size}) = {e:g} ({anchor.basis}) x (1 + B/B_noise)/(1 + "
        f"{anchor.batch_size}/B_noise), B_noise = {_fmt(noise.value)} "
        f"({_fmt(noise.low)}-{_fmt(noise.high)}, {noise.confidence:.0%}) from the probe; "
        f"the interval reaches B_noise = inf (it grows in training)"
    )
    return EpochsEstimate(
        batch_size,
        max(1, math.ceil(value - 1e-9)),
        value,
        low,
        high,
        "predicted",
        basis,
        noise.value,
        "probe",
    )


def scaled_lr(
    lr_ref: float, b_ref: int, batch_size: int, b_noise: float, adaptive: bool = False
) -> float:
    """The learning rate at ``batch_size`` by :data:`LR_RULE` from ``lr_ref`` at ``b_ref``."""
    if math.isinf(b_noise):
        factor = batch_size / b_ref
    else:
        factor = (1.0 + b_noise / b_ref) / (1.0 + b_noise / batch_size)
    return lr_ref * (math.sqrt(factor) if adaptive else factor)


def _fmt(x: float) -> str:
    return "inf" if not math.isfinite(x) else f"{x:.0f}" if x >= 10 else f"{x:.2g}"
