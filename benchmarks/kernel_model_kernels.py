"""Per-operator errors of the kernel model on rows its fit never saw (issue #26).

Three checks, each on the measured tables of ``benchmarks/data/gpu-kernels``:

- leave one GPU out (``train/``): for each of the five measured GPUs, the model is fitted on
  the other four GPUs' rows and predicts the fifth from its spec sheet alone;
- ``test/`` shapes on the measured GPUs: fitted on all ``train/`` rows plus the other four
  GPUs' ``test/`` rows, predicting this GPU's ``test/`` rows;
- the GPUs never fitted (H100, L4, A100 80GB): the shipped fit predicts their ``test/`` rows.

A table row is timed by the artefact's harness, host dispatch included: the comparison uses
``(floor^p + t^p)^(1/p)`` of the predicted device time ``t`` and the harness floor of that
GPU and op (the median floor of the fitted GPUs where the GPU is not measured); ``p`` is
chosen on the fitted rows. Three designs are compared by leave one GPU out: a roofline with
one fitted efficiency per family, a ridge regression on the same features, and the shipped
gradient-boosted trees.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from advisor.prediction.kernels import fit as F
from advisor.prediction.kernels.features import FAMILIES
from advisor.prediction.kernels.gpus import SAME_CHIP, GpuSpec, gpu_spec
from advisor.prediction.kernels.tables import read_family, subset

KIND = {"linear": "linear", "bmm": "bmm", "conv": "conv", "ln": "layernorm",
        "softmax": "softmax"}  # fmt: skip
UNSEEN = ("H100", "L4", "A100-80GB-PCIe")
HARNESS_P = (2.0, 4.0, 8.0, 16.0)


@dataclass(frozen=True)
class Held:
    """Held-out predictions: per row the kind, GPU, measured and predicted (harness) seconds,
    the interval and whether the row is above twice its floor (device-bound)."""

    kind: np.ndarray
    gpu: np.ndarray
    measured: np.ndarray
    predicted: np.ndarray
    low: np.ndarray
    high: np.ndarray
    device_bound: np.ndarray

    def error(self) -> np.ndarray:
        return np.abs(self.predicted / self.measured - 1)

    @staticmethod
    def concat(parts: list[Held]) -> Held:
        return Held(
            *(np.concatenate([getattr(p, f) for p in parts]) for f in Held.__dataclass_fields__)
        )


def kind_of(table: np.ndarray) -> np.ndarray:
    return np.array([KIND.get(t, "elementwise") for t in table.tolist()])


class Designs:
    """The three candidate designs, fitted on ``(x, y)`` and predicting ``y`` at ``x``."""

    @staticmethod
    def roofline(x: np.ndarray, y: np.ndarray, family: str) -> Callable[[np.ndarray], Any]:
        level = float(np.median(y))
        return lambda z: np.full(len(z), level)

    @staticmethod
    def ridge(x: np.ndarray, y: np.ndarray, family: str) -> Callable[[np.ndarray], Any]:
        from sklearn.linear_model import Ridge
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import PolynomialFeatures, StandardScaler

        model = make_pipeline(StandardScaler(), PolynomialFeatures(2), Ridge(alpha=1.0))
        return model.fit(x, y).predict

    @staticmethod
    def trees(x: np.ndarray, y: np.ndarray, family: str) -> Callable[[np.ndarray], Any]:
        return F.regressor(x, y, family).predict


def harness(t: np.ndarray, floor: np.ndarray, p: float) -> np.ndarray:
    """What the artefact's harness times for a kernel of device time ``t``."""
    return (floor**p + t**p) ** (1.0 / p)


def _floors(
    rows: dict[str, np.ndarray], floor: dict[str, dict[str, float]], gpu_known: bool
) -> np.ndarray:
    prior = {
        t: statistics.median(f[t] for f in floor.values() if t in f)
        for t in set(rows["table"].tolist())
    }
    return np.array(
        [
            floor[g][t] if gpu_known and g in floor else prior[t]
            for g, t in zip(rows["gpu"], rows["table"], strict=True)
        ]
    )


def _predict(
    design: Callable[..., Any], fitted: dict[str, np.ndarray], held: dict[str, np.ndarray],
    family: str, specs: dict[str, GpuSpec], floor_s: np.ndarray, p: float,
    interval: tuple[float, float], bias: dict[str, float] | None = None,
) -> Held:  # fmt: skip
    x, t_roof = F.prepare(fitted, family, specs)
    predict = design(x, F.target(fitted["t"], t_roof), family)
    xh, th = F.prepare(held, family, specs)
    b = np.array([(bias or {}).get(g, 0.0) for g in held["gpu"].tolist()])
    core = th * np.exp(predict(xh) + b)
    t = F.LAUNCH_S + core
    lo = F.LAUNCH_S + core * np.exp(min(interval[0], 0.0))
    hi = F.LAUNCH_S + core * np.exp(max(interval[1], 0.0))
    return Held(
        kind_of(held["table"]), held["gpu"], held["t"], harness(t, floor_s, p),
        harness(lo, floor_s, p), harness(hi, floor_s, p), held["t"] >= F.DEVICE_BOUND * floor_s,
    )  # fmt: skip


def specs_for(*rows: dict[str, np.ndarray]) -> dict[str, GpuSpec]:
    return {n: gpu_spec(n) for r in rows for n in set(r["gpu"].tolist())}


def leave_one_gpu_out(
    data: Path, design: Callable[..., Any], p: float, params: dict[str, Any]
) -> Held:
    """Every ``train/`` row predicted by a fit on the other GPUs (spec-only for its GPU)."""
    parts = []
    for family in FAMILIES:
        fitted, floor = F.training_rows(data, family)
        rows = read_family(data, "train", family)
        specs = specs_for(rows, fitted)
        interval = tuple(params["families"][family]["interval_spec"])
        for gpu in sorted(floor):
            others = {g: f for g, f in floor.items() if g != gpu}
            held = subset(rows, rows["gpu"] == gpu)
            parts.append(
                _predict(design, subset(fitted, fitted["gpu"] != gpu), held, family, specs,
                         _floors(held, others, False), p, interval)
            )  # fmt: skip
    return Held.concat(parts)


def test_shapes(data: Path, p: float, params: dict[str, Any]) -> Held:
    """Each measured GPU's ``test/`` rows from a fit on ``train/`` and the other GPUs'
    ``test/`` rows (the GPU's own level from its ``train/`` rows: ``fit.test_shape_residuals``).
    The interval of a GPU's rows is calibrated on the other GPUs' residuals only."""
    parts = []
    for family in FAMILIES:
        test = read_family(data, "test", family)
        if not test:
            continue
        fitted, floor = F.training_rows(data, family)
        held = F.test_shape_residuals(data, family, specs_for(fitted, test))
        for gpu in sorted(set(held["gpu"].tolist())):
            mine = held["gpu"] == gpu
            lo, hi = (np.percentile(held["residual"][~mine], q) for q in F.PERCENTILES)
            rows = subset(held, mine)
            core = rows["pred_s"] - F.LAUNCH_S
            floor_s = _floors(rows, floor, True)
            parts.append(
                Held(kind_of(rows["table"]), rows["gpu"], rows["t"],
                     harness(rows["pred_s"], floor_s, p),
                     harness(F.LAUNCH_S + core * np.exp(min(lo, 0.0)), floor_s, p),
                     harness(F.LAUNCH_S + core * np.exp(max(hi, 0.0)), floor_s, p),
                     np.ones(int(mine.sum()), dtype=bool))
            )  # fmt: skip
    return Held.concat(parts)


def unseen(data: Path, p: float, params: dict[str, Any]) -> Held:
    """The ``test/`` rows of the GPUs never fitted, from the shipped fit's parameters."""
    from advisor.prediction.kernels.model import KernelModel

    model = KernelModel.from_dict(params)
    parts = []
    for family in FAMILIES:
        test = read_family(data, "test", family)
        if not test:
            continue
        held = subset(test, np.isin(test["gpu"], UNSEEN))
        if not len(held["t"]):
            continue
        specs = specs_for(held)
        peak, bandwidth, sms = F.gpu_arrays(held["gpu"], family, specs)
        chips = np.array([SAME_CHIP.get(g, "") for g in held["gpu"].tolist()])
        times = model.device_times(family, held, peak, bandwidth, sms, held["gpu"], 0.0, chips)
        _, floor = F.training_rows(data, family)
        floor_s = _floors(held, floor, False)
        parts.append(
            Held(kind_of(held["table"]), held["gpu"], held["t"], harness(times.value, floor_s, p),
                 harness(times.low, floor_s, p), harness(times.high, floor_s, p),
                 held["t"] >= F.DEVICE_BOUND * floor_s)
        )  # fmt: skip
    return Held.concat(parts)


def choose_p(data: Path, params: dict[str, Any]) -> float:
    """The harness exponent that best matches the fitted GPUs' ``train/`` rows in sample."""
    from advisor.prediction.kernels.model import KernelModel

    model = KernelModel.from_dict(params)
    best = (np.inf, HARNESS_P[0])
    pairs = []
    for family in FAMILIES:
        rows = read_family(data, "train", family)
        _, floor = F.training_rows(data, family)
        specs = specs_for(rows)
        peak, bandwidth, sms = F.gpu_arrays(rows["gpu"], family, specs)
        t = model.device_times(family, rows, peak, bandwidth, sms, rows["gpu"]).value
        pairs.append((t, _floors(rows, floor, True), rows["t"]))
    for p in HARNESS_P:
        err = np.concatenate([np.abs(np.log(harness(t, h, p) / m)) for t, h, m in pairs])
        best = min(best, (float(np.median(err)), p))
    return best[1]


def summary(held: Held, by: str = "kind") -> list[tuple[str, str, int, float, float, float]]:
    """(kind, GPU, rows, median, p90 |error|, 80 % interval coverage) per kind and GPU."""
    out = []
    err = held.error()
    inside = (held.low <= held.measured) & (held.measured <= held.high)
    for kind in sorted(set(held.kind.tolist())):
        for gpu in [*sorted(set(held.gpu.tolist())), "all"]:
            m = (held.kind == kind) & ((held.gpu == gpu) if gpu != "all" else True)
            if m.any():
                e = err[m]
                out.append((kind, gpu, int(m.sum()), float(np.median(e)),
                            float(np.quantile(e, 0.9)), float(inside[m].mean())))  # fmt: skip
    return out
