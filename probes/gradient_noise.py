"""The gradient noise scale ``B_simple = tr(Sigma) / |G|^2`` measured by the probe.

McCandlish et al. 2018, "An Empirical Model of Large-Batch Training", appendix A.1: the
squared norm of a mini-batch gradient at batch size ``B`` has expectation
``E|g_B|^2 = |G|^2 + tr(Sigma) / B``; measuring it at two batch sizes gives unbiased
estimates of both terms.

The probe's estimator (:func:`estimate_pooled`, issue #19): every batch is split into
``CHUNKS`` micro-batches of ``b`` samples and each one's mean gradient taken at the same
weights (no optimizer step). With the weights fixed all micro-batches of all batches are
independent draws, so ``|G|^2`` is the mean dot product over every pair of distinct
micro-batches and ``tr(Sigma) = b (mean |g_b|^2 - |G|^2)``: ``B_small = b`` and ``B_big`` =
all ``N`` measured samples. It uses ~``N^2`` sample pairs where splitting each batch in two
halves and averaging per batch (:func:`estimate_noise_scale`, the first version, kept for
comparison) used ``N B / 2``; the noise scale is the ratio of the pooled means, its interval
a percentile bootstrap over batches. When ``|G|^2`` is not positive the noise swamps the
signal: ``B_simple`` is then reported as infinite with a finite lower bound.

The framework parts, which only compute the micro-batch gradients and import their framework
when called, are in :mod:`advisor.probes.gradient_noise_frameworks`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

CONFIDENCE = 0.9  # the interval's coverage
BOOTSTRAP = 2000
NOISE_BATCHES = 16  # batches the probe spends on the measurement, at most
NOISE_SECONDS = 12.0  # its own time box (the timed iterations have theirs)
MIN_NOISE_BATCHES = 3  # a time-boxed measurement still takes this many
CHUNKS = 8  # micro-batches per batch (B_small = B / CHUNKS)
NOISE_MEMORY = 512 * 2**20  # bytes for the kept per-batch gradient sums (caps the batches)
POOLED_METHOD = (
    "B_simple from micro-batch gradients at fixed weights, all pairs over the measured "
    "samples (McCandlish et al. 2018, A.1, B_small = micro-batch, B_big = all samples)"
)


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
        low, high = _percentiles(g2[idx].mean(axis=1), trace[idx].mean(axis=1), confidence)
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


def _pooled_terms(
    weights: np.ndarray, gram: np.ndarray, sq: np.ndarray, chunks: int, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """(``|G|^2``, ``tr(Sigma)``) for each row of group ``weights`` (1 = every group once)."""
    diag = np.diag(gram)
    total = weights.sum(axis=1)
    quad = np.einsum("ig,gh,ih->i", weights, gram, weights)
    # pairs of distinct micro-batches: across groups, and within a group
    cross = quad - (weights**2) @ diag + weights @ (diag - sq)
    pairs = chunks * chunks * (total**2 - (weights**2).sum(axis=1)) + chunks * (chunks - 1) * total
    g2 = cross / pairs
    trace = size * ((weights @ sq) / (chunks * total) - g2)
    return g2, trace


def estimate_pooled(
    gram: np.ndarray,
    sq: np.ndarray,
    chunks: int,
    size: int,
    *,
    confidence: float = CONFIDENCE,
    n_boot: int = BOOTSTRAP,
    seed: int = 0,
    overhead_s: float = 0.0,
) -> NoiseScale:
    """``B_simple`` from micro-batch gradients all taken at the same weights (the pooled one).

    ``G`` groups (a probe's batches) of ``chunks`` micro-batches of ``size`` samples each;
    ``gram[g, h]`` is the dot product of group ``g``'s and group ``h``'s sums of micro-batch
    mean gradients, ``sq[g]`` the sum of group ``g``'s micro-batch squared norms. With the
    weights fixed every micro-batch is an independent draw, so ``|G|^2`` is the mean dot
    product over all pairs of distinct micro-batches (``E[g_c . g_d] = |G|^2``) and
    ``tr(Sigma) = size (mean |g_c|^2 - |G|^2)``: McCandlish's two-batch estimator with
    ``B_small = size`` and ``B_big`` = all ``N`` measured samples, which uses ``~N^2`` sample
    pairs instead of one batch's. The interval is a percentile bootstrap over groups.
    """
    gram = np.asarray(gram, dtype=float)
    sq = np.asarray(sq, dtype=float)
    n = len(sq)
    if gram.shape != (n, n) or n == 0:
        raise ValueError(f"need an n x n gram for n = {n} groups, but got {gram.shape}")
    if chunks < 1 or size < 1 or n * chunks < 2:
        raise ValueError(f"need >= 2 micro-batches of >= 1 sample, got {n}x{chunks} of {size}")
    g2_all, tr_all = _pooled_terms(np.ones((1, n)), gram, sq, chunks, size)
    value = _ratio(float(tr_all[0]), float(g2_all[0]))
    if n < 2:
        low, high = 0.0, math.inf
    else:
        rng = np.random.default_rng(seed)
        weights = np.stack(
            [np.bincount(row, minlength=n) for row in rng.integers(0, n, (n_boot, n))]
        )
        g2, trace = _pooled_terms(weights.astype(float), gram, sq, chunks, size)
        low, high = _percentiles(g2, trace, confidence)
    low, high = min(low, value), max(high, value)
    return NoiseScale(
        value=value,
        low=low,
        high=high,
        g2=float(g2_all[0]),
        trace_sigma=float(tr_all[0]),
        small_batch=size,
        big_batch=n * chunks * size,
        iterations=n,
        confidence=confidence,
        overhead_s=overhead_s,
        method=POOLED_METHOD,
    )


def _percentiles(g2: np.ndarray, trace: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentile interval of the bootstrap ratios (inf where |G|^2 <= 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(g2 > 0, np.maximum(trace, 0.0) / np.where(g2 > 0, g2, 1.0), np.inf)
    ratios.sort()
    k = len(ratios)
    tail = (1.0 - confidence) / 2.0
    return float(ratios[math.floor(tail * (k - 1))]), float(ratios[math.ceil((1 - tail) * (k - 1))])


def from_probe(probe: Any) -> NoiseScale | None:
    """The noise scale a probe result carries (``ProbeResult.gradient_noise``), if any."""
    data = getattr(probe, "gradient_noise", None)
    return NoiseScale.from_dict(data) if data else None
