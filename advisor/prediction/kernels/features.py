"""Physically meaningful, GPU-relative features of a kernel, vectorised over rows.

Each family's latency is modelled as ``t = t_roof * exp(f(x))``: the roofline time
``t_roof = max(flops / peak, bytes / bandwidth)`` on the target GPU times a learned
inefficiency of the shape ``f(x)``. The features ``x`` describe the shape relative to the GPU
(waves of output tiles over its SMs, compute vs memory time, rows per SM), never the GPU's
identity, so that a GPU the fit never saw is described in the same terms as the measured ones.

Families: ``gemm`` (linear, bmm and the 1x1 / weight-gradient convolutions as matrix
products), ``conv`` (convolutions as implicit matrix products), ``elementwise``,
``layernorm``, ``softmax``. Rows are dicts of equal-length numpy arrays.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

FAMILIES = ("gemm", "conv", "elementwise", "layernorm", "softmax")
# Output tile edges (elements) at which the waves over SMs are counted: the common tile
# sizes of cuBLAS/cuDNN float32 kernels.
TILES = (64, 128)
FEATURES = {
    "gemm": ("intensity", "waves64", "fill64", "waves128", "fill128", "log_k", "log_min_mn",
             "log_m", "log_n", "log_batch", "is_bmm"),
    "conv": ("intensity", "waves64", "fill64", "waves128", "fill128", "log_k", "log_min_mn",
             "log_m", "log_n", "log_cin", "log_hw"),
    "elementwise": ("log_bytes_per_sm", "inputs", "transcendental"),
    "layernorm": ("log_bytes_per_sm", "log_rows_per_sm", "log_h"),
    "softmax": ("log_bytes_per_sm", "log_rows_per_sm", "log_h"),
}  # fmt: skip

# Physical priors imposed on the fit (monotonic constraints, -1 falling, 0 free): the
# inefficiency ``f`` does not grow with more waves of output tiles or fuller last waves, nor
# with more bytes per SM or rows per SM for memory-bound kernels (more parallel work never
# lowers a kernel's utilisation). Chosen by leave-one-GPU-out error (docs/kernel-model.md).
MONOTONIC = {
    "gemm": (0, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0),
    "conv": (0, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0),
    "elementwise": (-1, 0, 0),
    "layernorm": (-1, -1, 0),
    "softmax": (-1, -1, 0),
}

Rows = Mapping[str, np.ndarray]


def gemm_like(
    rows: Rows, peak: np.ndarray, bandwidth: np.ndarray, sms: np.ndarray, family: str
) -> tuple[np.ndarray, np.ndarray]:
    """Features and roofline seconds of matrix products ``B x (M x K) . (K x N)``.

    ``rows``: B, M, N, K, flops, bytes (and ``is_bmm`` for gemm; ``cin``, ``hw`` for conv).
    ``peak`` FLOP/s, ``bandwidth`` bytes/s and ``sms`` are per row (the target GPU's).
    """
    b, m, n, k = (np.asarray(rows[c], dtype=float) for c in ("B", "M", "N", "K"))
    t_compute = np.asarray(rows["flops"], dtype=float) / peak
    t_memory = np.asarray(rows["bytes"], dtype=float) / bandwidth
    cols = {"intensity": np.log(t_compute / t_memory)}
    for tile in TILES:
        tiles = b * np.ceil(m / tile) * np.ceil(n / tile)
        waves = tiles / sms
        cols[f"waves{tile}"] = np.log(waves)
        cols[f"fill{tile}"] = waves / np.ceil(waves)
    cols["log_k"] = np.log(k)
    cols["log_min_mn"] = np.log(np.minimum(m, n))
    cols["log_m"], cols["log_n"] = np.log(m), np.log(n)
    if family == "gemm":
        cols["log_batch"] = np.log(b)
        cols["is_bmm"] = np.asarray(rows["is_bmm"], dtype=float)
    else:
        cols["log_cin"] = np.log(np.asarray(rows["cin"], dtype=float))
        cols["log_hw"] = np.log(np.asarray(rows["hw"], dtype=float))
    x = np.column_stack([cols[name] for name in FEATURES[family]])
    return x, np.maximum(t_compute, t_memory)


def memory_bound(
    rows: Rows, bandwidth: np.ndarray, sms: np.ndarray, family: str
) -> tuple[np.ndarray, np.ndarray]:
    """Features and roofline seconds (bytes / bandwidth) of memory-bound kernels.

    ``rows``: bytes; elementwise also ``inputs`` (1 or 2 tensors read) and ``transcendental``
    (0/1); layernorm and softmax ``R`` (rows) and ``H`` (row length).
    """
    nbytes = np.asarray(rows["bytes"], dtype=float)
    cols = {"log_bytes_per_sm": np.log(nbytes / sms)}
    if family == "elementwise":
        cols["inputs"] = np.asarray(rows["inputs"], dtype=float)
        cols["transcendental"] = np.asarray(rows["transcendental"], dtype=float)
    else:
        cols["log_rows_per_sm"] = np.log(np.asarray(rows["R"], dtype=float) / sms)
        cols["log_h"] = np.log(np.asarray(rows["H"], dtype=float))
    x = np.column_stack([cols[name] for name in FEATURES[family]])
    return x, nbytes / bandwidth


def features(
    family: str, rows: Rows, peak: np.ndarray, bandwidth: np.ndarray, sms: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(x, t_roof_s)`` of ``rows`` of ``family`` on the per-row GPU figures."""
    if family in ("gemm", "conv"):
        return gemm_like(rows, peak, bandwidth, sms, family)
    if family in FAMILIES:
        return memory_bound(rows, bandwidth, sms, family)
    raise ValueError(f"family must be one of {FAMILIES}, but got {family!r}")
