"""The fitted kernel model: device seconds of a kernel family's rows on GPUs, with intervals.

``t = launch + t_roof * exp(f(x) + bias_gpu)``: ``f`` the family's shipped trees, ``bias_gpu``
the measured GPU's own level (or its chip's, measured on another board; zero for a GPU whose
chip the tables never measured). The interval is the
10th..90th percentile of held-out residuals: of shapes not seen on a measured GPU, or of a
whole GPU left out of the fit (spec-only), widened by ``extra_log`` where the caller
extrapolates further (tensor cores, kinds never measured).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from advisor.prediction.kernels.features import FAMILIES, features
from advisor.prediction.kernels.trees import TreeEnsemble

PARAMS = Path(__file__).resolve().parent / "data" / "params.json"


@dataclass(frozen=True)
class FamilyModel:
    """One family's trees, per-GPU levels and residual percentiles (log space)."""

    family: str
    trees: TreeEnsemble
    bias: dict[str, float]
    interval_measured: tuple[float, float]
    interval_spec: tuple[float, float]
    floor_s: dict[str, dict[str, float]]
    floor_prior_s: dict[str, float]

    @classmethod
    def from_dict(cls, family: str, d: dict[str, Any]) -> FamilyModel:
        return cls(
            family=family,
            trees=TreeEnsemble.from_dict(d["trees"]),
            bias={k: float(v) for k, v in d["bias"].items()},
            interval_measured=(float(d["interval_measured"][0]), float(d["interval_measured"][1])),
            interval_spec=(float(d["interval_spec"][0]), float(d["interval_spec"][1])),
            floor_s=d["floor_s"],
            floor_prior_s=d["floor_prior_s"],
        )


@dataclass(frozen=True)
class DeviceTimes:
    """Seconds per row: the prediction and its 80 % interval; ``measured`` says whether the
    row's GPU had its own measurements for this family."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    measured: np.ndarray
    same_chip: np.ndarray  # level taken from the same chip measured on another board


@dataclass(frozen=True)
class KernelModel:
    """All families' fitted parameters (``data/params.json``)."""

    families: dict[str, FamilyModel]
    launch_s: float
    source: str

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KernelModel:
        return cls(
            families={f: FamilyModel.from_dict(f, p) for f, p in d["families"].items()},
            launch_s=float(d["launch_s"]),
            source=str(d["source"]),
        )

    def fitted_gpus(self, family: str = "gemm") -> list[str]:
        return sorted(self.families[family].bias)

    def device_times(
        self,
        family: str,
        rows: dict[str, np.ndarray],
        peak: np.ndarray,
        bandwidth: np.ndarray,
        sms: np.ndarray,
        gpu_names: np.ndarray,
        extra_log: np.ndarray | float = 0.0,
        chip_names: np.ndarray | None = None,
        float32_figures: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> DeviceTimes:
        """Device seconds of ``rows`` (one per row; the GPU figures and the measured-GPU
        name per row; ``chip_names``: the same chip measured on another board, or "").
        ``extra_log`` widens each side of the interval (natural log). ``float32_figures``:
        per row, the peak and the bandwidth at which the float32 kernel of the same shape
        runs (a tensor-core kernel's: the float32 peak, and the bandwidth over the bytes'
        shrink); the learned utilisation is read there and applied at ``peak`` (the
        tensor-core prior, docs/kernel-model.md), never at features no float32 kernel had."""
        if family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, but got {family!r}")
        fm = self.families[family]
        x, t_roof = features(family, rows, peak, bandwidth, sms)
        if float32_figures is not None:
            x, _ = features(family, rows, float32_figures[0], float32_figures[1], sms)
        f = fm.trees.predict(x)
        measured = np.array([g in fm.bias for g in gpu_names.tolist()], dtype=bool)
        chips = chip_names.tolist() if chip_names is not None else [""] * len(measured)
        same_chip = ~measured & np.array([c in fm.bias for c in chips], dtype=bool)
        bias = np.array(
            [
                fm.bias.get(g, fm.bias.get(c, 0.0))
                for g, c in zip(gpu_names.tolist(), chips, strict=True)
            ]
        )
        lo = np.where(measured, fm.interval_measured[0], fm.interval_spec[0]) - extra_log
        hi = np.where(measured, fm.interval_measured[1], fm.interval_spec[1]) + extra_log
        core = t_roof * np.exp(f + bias)
        return DeviceTimes(
            value=self.launch_s + core,
            low=self.launch_s + core * np.exp(np.minimum(lo, 0.0)),
            high=self.launch_s + core * np.exp(np.maximum(hi, 0.0)),
            measured=measured,
            same_chip=same_chip,
        )

    def harness_floor(self, family: str, table: str, gpu: str) -> float:
        """The measuring harness's floor for ``table`` on ``gpu`` (seconds): the GPU's own
        where measured, else the median over the measured GPUs (a prior for that host)."""
        fm = self.families[family]
        return fm.floor_s.get(gpu, {}).get(table, fm.floor_prior_s[table])


@lru_cache(maxsize=4)
def load_model(path: Path = PARAMS) -> KernelModel:
    """The shipped (or given) parameters, read once."""
    return KernelModel.from_dict(json.loads(Path(path).read_text()))
