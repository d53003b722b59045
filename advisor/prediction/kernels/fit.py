"""Fit the kernel model's parameters on the measured tables and write them as JSON.

Per family: a gradient-boosted tree model (scikit-learn ``HistGradientBoostingRegressor``) of
``y = log((t - launch) / t_roof)`` on the GPU-relative features of ``features.py``, fitted on
the ``train/`` rows and the ``test/`` rows of the same five GPUs (``training_rows``: the test
shapes are the transformer models' own, measured as the whole models were) whose latency is
at least twice the harness floor of their GPU and op (below that the measurement is the
host's dispatch time, not the kernel's) and at most ``LONGEST_S`` (the sweep's longest
kernels ran throttled). Then:

- ``bias``: per measured GPU, the median out-of-fold residual (5-fold over rows): the GPU's
  own level, used only for that GPU;
- ``interval_measured``: the 10th/90th percentile of the residuals of each measured GPU's
  ``test/`` shapes predicted by a fit without them (``test_shape_residuals``; for conv, with
  no ``test/`` rows, of the out-of-fold residuals after the bias): shapes not seen on a
  measured GPU;
- ``interval_spec``: the 10th/90th percentile of the leave-one-GPU-out residuals (a GPU not
  seen at all, predicted from its spec sheet alone);
- ``floor_s``: the harness floor (2nd percentile latency per GPU and table), used only to
  compare with the tables, never in a prediction.

    python -m advisor.prediction.kernels.fit benchmarks/data/gpu-kernels   # writes data/params.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from advisor.prediction.kernels.features import FAMILIES, FEATURES, MONOTONIC, features
from advisor.prediction.kernels.gpus import GpuSpec, gpu_spec
from advisor.prediction.kernels.tables import read_family, subset
from advisor.prediction.kernels.trees import from_sklearn

PARAMS = Path(__file__).resolve().parent / "data" / "params.json"
LAUNCH_S = 3e-6  # prior: device time of a kernel launch back to back (a few us on NVIDIA GPUs)
FLOOR_QUANTILE = 0.02
DEVICE_BOUND = 2.0  # rows at least this many times their floor are fitted
# Rows slower than this are left out: the sweep ran each shape 25 times, and its longest
# kernels (hundreds of ms to seconds) show clock throttling (float32 efficiency falling from
# ~0.8 to ~0.6 on the A100 and V100, and further on the P100 and P4) that no step of a
# training run holds for so long per kernel. Chosen by leave-one-GPU-out error.
LONGEST_S = 0.2
TREES = {"max_iter": 120, "max_leaf_nodes": 15, "learning_rate": 0.1, "random_state": 0}
FOLDS = 5
PERCENTILES = (10.0, 90.0)


def gpu_arrays(
    names: np.ndarray, family: str, specs: dict[str, GpuSpec]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row peak FLOP/s (float32 without tensor cores: how the tables were measured),
    bandwidth (bytes/s) and SM count of the named GPUs."""
    unique = {n: specs[n] for n in set(names.tolist())}
    peak = np.array([unique[n].fp32_tflops * 1e12 for n in names])
    bandwidth = np.array([unique[n].memory_bandwidth_gbs * 1e9 for n in names])
    sms = np.array([float(unique[n].sm_count) for n in names])
    return peak, bandwidth, sms


def prepare(
    rows: dict[str, np.ndarray], family: str, specs: dict[str, GpuSpec]
) -> tuple[np.ndarray, np.ndarray]:
    """Features and roofline seconds of measured rows on their own GPUs."""
    peak, bandwidth, sms = gpu_arrays(rows["gpu"], family, specs)
    return features(family, rows, peak, bandwidth, sms)


def floors(rows: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Harness floor (seconds) per GPU and table."""
    out: dict[str, dict[str, float]] = {}
    for gpu in sorted(set(rows["gpu"].tolist())):
        for table in sorted(set(rows["table"].tolist())):
            mask = (rows["gpu"] == gpu) & (rows["table"] == table)
            if mask.any():
                value = float(np.quantile(rows["t"][mask], FLOOR_QUANTILE))
                out.setdefault(gpu, {})[table] = value
    return out


def device_bound(rows: dict[str, np.ndarray], floor: dict[str, dict[str, float]]) -> np.ndarray:
    """Rows whose latency is at least DEVICE_BOUND x their GPU's floor for their table
    (and at most LONGEST_S)."""
    h = np.array([floor[g][t] for g, t in zip(rows["gpu"], rows["table"], strict=True)])
    return (rows["t"] >= DEVICE_BOUND * h) & (rows["t"] <= LONGEST_S)


def target(t: np.ndarray, t_roof: np.ndarray) -> np.ndarray:
    """``log((t - launch) / t_roof)``, the launch never taking more than half the time."""
    return np.log(np.maximum(t - LAUNCH_S, 0.5 * t) / t_roof)


def regressor(x: np.ndarray, y: np.ndarray, family: str) -> Any:
    from sklearn.ensemble import HistGradientBoostingRegressor

    model = HistGradientBoostingRegressor(monotonic_cst=list(MONOTONIC[family]), **TREES)
    return model.fit(x, y)


def leave_one_gpu_out(x: np.ndarray, y: np.ndarray, gpus: np.ndarray, family: str) -> np.ndarray:
    """Residuals ``y - prediction`` of each GPU's rows from a fit on the other GPUs."""
    residual = np.zeros(len(y))
    for gpu in sorted(set(gpus.tolist())):
        held = gpus == gpu
        residual[held] = y[held] - regressor(x[~held], y[~held], family).predict(x[held])
    return residual


def out_of_fold(x: np.ndarray, y: np.ndarray, family: str, seed: int = 0) -> np.ndarray:
    """Residuals of each row from a fit on the other FOLDS-1 folds (random rows)."""
    fold = np.random.default_rng(seed).integers(0, FOLDS, len(y))
    residual = np.zeros(len(y))
    for k in range(FOLDS):
        held = fold == k
        residual[held] = y[held] - regressor(x[~held], y[~held], family).predict(x[held])
    return residual


def training_rows(
    data: Path, family: str, test_gpus: tuple[str, ...] | None = None
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, float]]]:
    """The rows a fit uses and the harness floors: ``train/`` rows, plus the ``test/`` rows of
    the GPUs measured in ``train/`` (all of them, or those in ``test_gpus``), each at least
    DEVICE_BOUND x its floor and at most LONGEST_S. ``test/`` rows of GPUs that ``train/``
    never measured (H100, L4, A100 80GB) are never used."""
    rows = read_family(data, "train", family)
    floor = floors(rows)
    test = read_family(data, "test", family)
    if test:
        keep = np.isin(test["gpu"], sorted(floor))
        if test_gpus is not None:
            keep &= np.isin(test["gpu"], list(test_gpus))
        test = subset(test, keep & np.isin(test["table"], sorted(set(rows["table"].tolist()))))
        rows = {k: np.concatenate([rows[k], test[k]]) for k in rows}
    return subset(rows, device_bound(rows, floor)), floor


def test_shape_residuals(
    data: Path, family: str, specs: dict[str, GpuSpec]
) -> dict[str, np.ndarray]:
    """Each measured GPU's device-bound ``test/`` rows predicted by a fit on ``train/`` and the
    other GPUs' ``test/`` rows, with the GPU's level (``bias``) from its own ``train/`` rows:
    the rows, the predicted device seconds ``pred_s`` and ``residual`` (log measured/pred)."""
    test = read_family(data, "test", family)
    _, floor = training_rows(data, family)
    parts: list[dict[str, np.ndarray]] = []
    for gpu in sorted(floor) if test else []:
        held = subset(test, test["gpu"] == gpu)
        held = subset(held, device_bound(held, floor))
        if not len(held["t"]):
            continue
        fitted, _ = training_rows(data, family, tuple(g for g in floor if g != gpu))
        x, t_roof = prepare(fitted, family, specs)
        y = target(fitted["t"], t_roof)
        model = regressor(x, y, family)
        mine = fitted["gpu"] == gpu
        bias = float(np.median(y[mine] - model.predict(x[mine])))
        xh, th = prepare(held, family, specs)
        pred = LAUNCH_S + th * np.exp(model.predict(xh) + bias)
        parts.append({**held, "pred_s": pred, "residual": np.log(held["t"] / pred)})
    if not parts:
        return {}
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def fit_family(data: Path, family: str, specs: dict[str, GpuSpec]) -> dict[str, Any]:
    """One family's parameters (see the module docstring)."""
    fitted, floor = training_rows(data, family)
    rows = read_family(data, "train", family)
    x, t_roof = prepare(fitted, family, specs)
    y = target(fitted["t"], t_roof)
    gpus = fitted["gpu"]
    logo = leave_one_gpu_out(x, y, gpus, family)
    oof = out_of_fold(x, y, family)
    bias = {g: float(np.median(oof[gpus == g])) for g in sorted(set(gpus.tolist()))}
    centred = oof - np.array([bias[g] for g in gpus])
    held = test_shape_residuals(data, family, specs)
    measured = held["residual"] if held else centred
    model = from_sklearn(regressor(x, y, family))
    tables = sorted(set(rows["table"].tolist()))
    return {
        "features": list(FEATURES[family]),
        "fitted_gpus": sorted(bias),
        "rows": len(y),
        "bias": bias,
        "interval_measured": [float(np.percentile(measured, p)) for p in PERCENTILES],
        "interval_measured_from": "test shapes" if held else "out-of-fold rows",
        "interval_spec": [float(np.percentile(logo, p)) for p in PERCENTILES],
        "logo_median_abs": float(np.median(np.abs(np.expm1(logo)))),
        "floor_s": floor,
        "floor_prior_s": {t: float(np.median([f[t] for f in floor.values()])) for t in tables},
        "trees": model.to_dict(),
    }


def fit_all(data: Path) -> dict[str, Any]:
    """Every family's parameters plus the shared constants."""
    names = {n for family in FAMILIES for n in set(read_family(data, "train", family)["gpu"])}
    specs = {n: gpu_spec(n) for n in names}
    return {
        "version": 1,
        "source": "train/ tables and the fitted GPUs' test/ tables of the NeuSight artefact's measurements "
        "(benchmarks/data/gpu-kernels): PyTorch 2.1, CUDA 12.1, float32, TF32 off",
        "launch_s": LAUNCH_S,
        "percentiles": list(PERCENTILES),
        "families": {family: fit_family(data, family, specs) for family in FAMILIES},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="the gpu-kernels folder (benchmarks/data/...)")
    parser.add_argument("--out", type=Path, default=PARAMS)
    args = parser.parse_args(argv)
    started = time.time()
    params = fit_all(args.data)
    args.out.write_text(json.dumps(params, separators=(",", ":")) + "\n")
    for family, p in params["families"].items():
        print(
            f"{family}: {p['rows']} rows on {', '.join(p['fitted_gpus'])}; leave-one-GPU-out "
            f"median |error| {p['logo_median_abs']:.1%}"
        )
    print(
        f"wrote {args.out} ({args.out.stat().st_size / 1e3:.0f} kB, {time.time() - started:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
