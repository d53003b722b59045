"""Read the measured kernel tables (gzipped CSV) into per-family rows for fitting and checks.

The tables are the repository's trimmed copy of the NeuSight artefact's measurements
(``benchmarks/data/gpu-kernels``; see its README): one row per operator call with its shape,
``Latency`` (ms, forward, float32) and ``Device``. The artefact's harness (``collect.py``)
ran ``x @ W^T + b`` with ``x`` of shape (B, M, N) and ``W`` of shape (K, N) for ``linear``
and ``torch.bmm`` of (B, M, N) by (B, N, K) for ``bmm``: the reduction is over the table's
``N``, the output is M x K. Here every product is written ``B x (M x K) . (K x N)`` with
``K`` the reduction (the convention of ``advisor.probes.operators``), so the table's N and K
swap on reading.
"""

from __future__ import annotations

import csv
import gzip
from collections import defaultdict
from pathlib import Path

import numpy as np

from advisor.prediction.kernels.gpus import DATA_DEVICE_NAMES

ELEMENTWISE_TABLES = ("add", "addu", "mul", "mulu", "div", "divu", "pow", "powu", "relu",
                      "gelu", "tanh")  # fmt: skip
BINARY = frozenset({"add", "mul", "div", "pow"})
TRANSCENDENTAL = frozenset({"gelu", "tanh", "pow", "powu"})
FAMILY_TABLES = {
    "gemm": ("linear", "bmm"),
    "conv": ("conv",),
    "elementwise": ELEMENTWISE_TABLES,
    "layernorm": ("ln",),
    "softmax": ("softmax",),
}
FLOAT32 = 4


def _read(path: Path) -> list[dict[str, str]]:
    with gzip.open(path, "rt", newline="") as fh:
        return list(csv.DictReader(fh))


def _gemm(table: str, raw: list[dict[str, str]]) -> dict[str, np.ndarray]:
    b, m, n_red, k_out = (np.array([float(r[c]) for r in raw]) for c in ("B", "M", "N", "K"))
    if table == "linear":  # (B*M) x N_red times N_red x K_out, plus the bias
        rows_m, batch = b * m, np.ones_like(b)
        nbytes = FLOAT32 * (rows_m * n_red + n_red * k_out + rows_m * k_out + k_out)
    else:
        rows_m, batch = m, b
        nbytes = FLOAT32 * b * (m * n_red + n_red * k_out + m * k_out)
    return {
        "B": batch,
        "M": rows_m,
        "N": k_out,
        "K": n_red,
        "flops": 2.0 * batch * rows_m * n_red * k_out,
        "bytes": nbytes,
        "is_bmm": np.full(len(raw), 1.0 if table == "bmm" else 0.0),
    }


def _conv(raw: list[dict[str, str]]) -> dict[str, np.ndarray]:
    columns = ("B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride",
               "Padding")  # fmt: skip
    b, cin, cout, ks, size, stride, pad = (np.array([float(r[c]) for r in raw]) for c in columns)
    out = np.floor((size + 2 * pad - ks) / stride) + 1
    return conv_rows(b, cin, cout, ks, size, out)


def conv_rows(
    b: np.ndarray, cin: np.ndarray, cout: np.ndarray, ks: np.ndarray, size: np.ndarray,
    out: np.ndarray,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Implicit-GEMM rows of square 2-D convolutions (input ``size``, output ``out``)."""
    m, n, k = b * out * out, cout, cin * ks * ks
    nbytes = FLOAT32 * (b * cin * size * size + cout * cin * ks * ks + b * cout * out * out)
    return {"B": np.ones_like(b), "M": m, "N": n, "K": k, "flops": 2.0 * m * n * k,
            "bytes": nbytes, "cin": cin, "hw": out * out}  # fmt: skip


def _rows_h(table: str, raw: list[dict[str, str]]) -> dict[str, np.ndarray]:
    r, h = (np.array([float(x[c]) for x in raw]) for c in ("B", "H"))
    if table == "ln":  # x read, y written, gamma and beta read, mean and rstd written
        nbytes = FLOAT32 * (2 * r * h + 2 * h + 2 * r)
        return {"R": r, "H": h, "bytes": nbytes}
    if table == "softmax":
        return {"R": r, "H": h, "bytes": FLOAT32 * 2 * r * h}
    inputs = 2.0 if table in BINARY else 1.0
    return {
        "bytes": FLOAT32 * r * h * (inputs + 1),
        "inputs": np.full(len(raw), inputs),
        "transcendental": np.full(len(raw), 1.0 if table in TRANSCENDENTAL else 0.0),
    }


def read_family(data: Path, split: str, family: str) -> dict[str, np.ndarray]:
    """All measured rows of ``family`` in ``data/split``: shape columns, ``t`` (seconds),
    ``gpu`` (catalog name) and ``table`` (the measured op, e.g. ``linear``, ``gelu``)."""
    parts: dict[str, list[np.ndarray]] = defaultdict(list)
    for table in FAMILY_TABLES[family]:
        path = data / split / f"{table}.csv.gz"
        if not path.exists():
            continue
        raw = _read(path)
        if family == "gemm":
            cols = _gemm(table, raw)
        elif family == "conv":
            cols = _conv(raw)
        else:
            cols = _rows_h(table, raw)
        cols["t"] = np.array([float(r["Latency"]) * 1e-3 for r in raw])
        cols["gpu"] = np.array([DATA_DEVICE_NAMES[r["Device"]] for r in raw])
        cols["table"] = np.full(len(raw), table)
        for key, value in cols.items():
            parts[key].append(value)
    return {key: np.concatenate(values) for key, values in parts.items()}


def subset(rows: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    """The rows where ``mask`` holds."""
    return {key: value[mask] for key, value in rows.items()}
