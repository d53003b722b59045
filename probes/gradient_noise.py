"""The gradient noise scale ``B_simple = tr(Sigma) / |G|^2`` measured by the probe.

McCandlish et al. 2018, "An Empirical Model of Large-Batch Training", appendix A.1: the
squared norm of a mini-batch gradient at batch size ``B`` has expectation
``E|g_B|^2 = |G|^2 + tr(Sigma) / B``. Measuring it at two batch sizes -- here each half of a
batch (``B_small = B / 2``, the mean of the two halves' squared norms) and the whole batch
(``B_big = B``, the mean of the halves' gradients) -- gives unbiased estimates of both terms
for every iteration::

    |G|^2      ~ (B_big |g_big|^2 - B_small |g_small|^2) / (B_big - B_small)
    tr(Sigma)  ~ (|g_small|^2 - |g_big|^2) / (1 / B_small - 1 / B_big)

Each is averaged over the probe's iterations *before* taking the ratio (the ratio of noisy
means, as the paper recommends); the interval is a percentile bootstrap over iterations.
When the mean ``|G|^2`` is not positive the noise swamps the signal at this batch size:
``B_simple`` is then reported as infinite with a finite lower bound.

The framework parts (:func:`torch_gradient_noise`, :func:`keras_gradient_noise`) only compute
the two squared norms per batch; they import their framework when called.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

CONFIDENCE = 0.9  # the interval's coverage
BOOTSTRAP = 2000
NOISE_BATCHES = 8  # batches the probe spends on the measurement
MIN_NOISE_BATCHES = 3  # a time-boxed measurement still takes this many


@dataclass(frozen=True)
class NoiseScale:
    """``B_simple`` with a bootstrap interval (``low <= value <= high``; ``inf`` allowed).

    ``g2`` and ``trace_sigma`` are the iteration means of the two unbiased estimates;
    ``small_batch``/``big_batch`` the two batch sizes; ``iterations`` how many batches were
    measured; ``overhead_s`` what the measurement cost in the probe (seconds, measured).
    """

    value: float
    low: float
    high: float
    g2: float
    trace_sigma: float
    small_batch: int
    big_batch: int
    iterations: int
    confidence: float = CONFIDENCE
    overhead_s: float = 0.0
    method: str = "B_simple from |g|^2 at B/2 and B (McCandlish et al. 2018, A.1)"

    def __post_init__(self) -> None:
        if not (self.low <= self.value <= self.high):
            raise ValueError(
                f"low <= value <= high must hold, but got {self.low}, {self.value}, {self.high}"
            )

    @property
    def resolved(self) -> bool:
        """Whether the signal |G|^2 was measurably positive (a finite estimate)."""
        return math.isfinite(self.value)

    def to_dict(self) -> dict[str, Any]:
        # JSON has no infinity: None stands for it.
        data = asdict(self)
        for key in ("value", "low", "high"):
            if not math.isfinite(data[key]):
                data[key] = None
        return data

    @classmethod
    def from_dict(cls, data: Any) -> NoiseScale:
        """The inverse of :meth:`to_dict`, validated: unknown or missing fields, wrong types
        or values out of range raise ValueError with a one-line reason."""
        if not isinstance(data, dict):
            raise ValueError(f"a noise scale must be an object, but got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown noise scale field(s): {', '.join(map(str, unknown))}")
        required = ("value", "low", "high", "g2", "trace_sigma", "small_batch", "big_batch")
        missing = [k for k in (*required, "iterations") if k not in data]
        if missing:
            raise ValueError(f"noise scale field(s) missing: {', '.join(missing)}")
        out = dict(data)
        for key in ("value", "low", "high"):
            if out[key] is None:  # JSON's stand-in for infinity
                out[key] = math.inf
        for key in ("value", "low", "high", "g2", "trace_sigma", "confidence", "overhead_s"):
            if key in out:
                v = out[key]
                if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v):
                    raise ValueError(f"noise scale field {key} must be a number, but got {v!r}")
        for key in ("value", "low", "high", "overhead_s"):
            if key in out and out[key] < 0:
                raise ValueError(f"noise scale field {key} must be >= 0, but got {out[key]!r}")
        for key in ("small_batch", "big_batch", "iterations"):
            v = out[key]
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"noise scale field {key} must be an integer > 0, got {v!r}")
        if not out["small_batch"] < out["big_batch"]:
            raise ValueError("noise scale needs small_batch < big_batch")
        if "confidence" in out and not 0 < out["confidence"] < 1:
            raise ValueError(f"noise scale confidence must be in (0, 1), got {out['confidence']}")
        if not isinstance(out.get("method", ""), str):
            raise ValueError("noise scale field method must be a string")
        return cls(**out)


def per_iteration_estimates(
    small_sq: Sequence[float], big_sq: Sequence[float], b_small: int, b_big: int
) -> tuple[np.ndarray, np.ndarray]:
    """The unbiased per-iteration estimates (``|G|^2``, ``tr(Sigma)``) from squared norms."""
    if not 0 < b_small < b_big:
        raise ValueError(f"need 0 < b_small < b_big, but got {b_small}, {b_big}")
    small = np.asarray(small_sq, dtype=float)
    big = np.asarray(big_sq, dtype=float)
    if small.shape != big.shape or small.ndim != 1 or len(small) == 0:
        raise ValueError(
            f"need two equally long, non-empty sequences, got {small.shape}, {big.shape}"
        )
    g2 = (b_big * big - b_small * small) / (b_big - b_small)
    trace = (small - big) / (1.0 / b_small - 1.0 / b_big)
    return g2, trace


def _ratio(trace: float, g2: float) -> float:
    if g2 <= 0:
        return math.inf
    return max(trace, 0.0) / g2


def estimate_noise_scale(
    small_sq: Sequence[float],
    big_sq: Sequence[float],
    b_small: int,
    b_big: int,
    *,
    confidence: float = CONFIDENCE,
    n_boot: int = BOOTSTRAP,
    seed: int = 0,
    overhead_s: float = 0.0,
) -> NoiseScale:
    """``B_simple`` from squared gradient norms measured at ``b_small`` and ``b_big``.

    ``small_sq[i]`` and ``big_sq[i]`` are ``|g|^2`` at the two batch sizes on iteration ``i``.
    The interval is the percentile bootstrap of the ratio of means over iterations.
    """
    g2, trace = per_iteration_estimates(small_sq, big_sq, b_small, b_big)
    value = _ratio(float(trace.mean()), float(g2.mean()))
    n = len(g2)
    if n < 2:
        low, high = 0.0, math.inf
    else:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, n, size=(n_boot, n))
        boot_g2 = g2[idx].mean(axis=1)
        boot_tr = np.maximum(trace[idx].mean(axis=1), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(boot_g2 > 0, boot_tr / np.where(boot_g2 > 0, boot_g2, 1.0), np.inf)
        ratios.sort()
        tail = (1.0 - confidence) / 2.0
        low = float(ratios[math.floor(tail * (n_boot - 1))])
        high = float(ratios[math.ceil((1.0 - tail) * (n_boot - 1))])
    low, high = min(low, value), max(high, value)
    return NoiseScale(
        value=value,
        low=low,
        high=high,
        g2=float(g2.mean()),
        trace_sigma=float(trace.mean()),
        small_batch=b_small,
        big_batch=b_big,
        iterations=n,
        confidence=confidence,
        overhead_s=overhead_s,
    )


def torch_gradient_noise(
    model: Any,
    loss_fn: Any,
    batches: Iterable[tuple[Any, Any]],
    *,
    max_batches: int = NOISE_BATCHES,
    max_seconds: float | None = None,
) -> NoiseScale | None:
    """Measure ``B_simple`` on a PyTorch model at its current weights (no optimizer step).

    Each ``(inputs, targets)`` batch (already on the model's device) is split into two
    halves; each half's gradient is taken with ``loss.backward()`` (two half-size passes,
    the FLOPs of one full pass). The model's ``.grad`` buffers are left cleared.
    Returns None when fewer than 2 batches of at least 2 samples came. ``max_seconds``
    time-boxes it (at least ``MIN_NOISE_BATCHES`` batches are measured).
    """
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    small_sq: list[float] = []
    big_sq: list[float] = []
    sizes: set[int] = set()
    start = time.perf_counter()

    def half_grad(x: Any, y: Any) -> torch.Tensor:
        for p in params:
            p.grad = None
        loss_fn(model(x), y).backward()
        return torch.cat(
            [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
        ).detach()

    model.train()
    for inputs, targets in batches:
        if len(small_sq) >= max_batches or _time_up(len(small_sq), start, max_seconds):
            break
        half = len(inputs) // 2
        if half < 1:
            continue
        g1 = half_grad(inputs[:half], targets[:half])
        g2 = half_grad(inputs[half : 2 * half], targets[half : 2 * half])
        small_sq.append(float((g1.square().sum() + g2.square().sum()) / 2))
        big_sq.append(float(((g1 + g2) / 2).square().sum()))
        sizes.add(half)
    for p in params:
        p.grad = None
    if len(small_sq) < 2 or len(sizes) != 1:
        return None
    half = sizes.pop()
    return estimate_noise_scale(
        small_sq, big_sq, half, 2 * half, overhead_s=time.perf_counter() - start
    )


def keras_gradient_noise(
    model: Any,
    loss_fn: Any,
    batches: Iterable[tuple[Any, Any]],
    *,
    max_batches: int = NOISE_BATCHES,
    max_seconds: float | None = None,
) -> NoiseScale | None:
    """Measure ``B_simple`` on a Keras model with ``tf.GradientTape`` (no optimizer step).

    Same split-batch method as :func:`torch_gradient_noise`; ``loss_fn(y_true, y_pred)`` is
    the model's loss (e.g. ``model.loss``). Returns None when fewer than 2 usable batches came.
    """
    import tensorflow as tf

    weights = model.trainable_weights
    small_sq: list[float] = []
    big_sq: list[float] = []
    sizes: set[int] = set()
    start = time.perf_counter()

    def half_grad(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, weights)
        return tf.concat(
            [
                tf.reshape(g if g is not None else tf.zeros_like(w), [-1])
                for g, w in zip(grads, weights, strict=True)
            ],
            axis=0,
        )

    for inputs, targets in batches:
        if len(small_sq) >= max_batches or _time_up(len(small_sq), start, max_seconds):
            break
        half = int(inputs.shape[0]) // 2
        if half < 1:
            continue
        g1 = half_grad(inputs[:half], targets[:half])
        g2 = half_grad(inputs[half : 2 * half], targets[half : 2 * half])
        small_sq.append(float((tf.reduce_sum(g1 * g1) + tf.reduce_sum(g2 * g2)) / 2))
        mean = (g1 + g2) / 2
        big_sq.append(float(tf.reduce_sum(mean * mean)))
        sizes.add(half)
    if len(small_sq) < 2 or len(sizes) != 1:
        return None
    half = sizes.pop()
    return estimate_noise_scale(
        small_sq, big_sq, half, 2 * half, overhead_s=time.perf_counter() - start
    )


def _time_up(done: int, start: float, max_seconds: float | None) -> bool:
    """The time box: at least MIN_NOISE_BATCHES, then stop once ``max_seconds`` have passed."""
    return (
        max_seconds is not None
        and done >= MIN_NOISE_BATCHES
        and time.perf_counter() - start >= max_seconds
    )


def from_probe(probe: Any) -> NoiseScale | None:
    """The noise scale a probe result carries (``ProbeResult.gradient_noise``), if any."""
    data = getattr(probe, "gradient_noise", None)
    return NoiseScale.from_dict(data) if data else None


def keras_noise_for_probe(
    model: Any, train_data: Any, max_seconds: float | None = None
) -> NoiseScale | None:
    """The noise scale of a Keras probe's compiled ``model`` (its own loss) measured on
    ``train_data`` (a batched dataset), time-boxed by ``max_seconds``; None when the loss is
    not a callable Keras knows or fewer than 2 usable batches came."""
    import keras

    loss = model.loss
    loss_fn = keras.losses.get(loss) if isinstance(loss, str) else loss
    if not callable(loss_fn):
        return None
    return keras_gradient_noise(model, loss_fn, iter(train_data), max_seconds=max_seconds)
