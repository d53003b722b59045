"""The epochs model fitted to several known points (issue #19).

With two or more known ``(batch size, epochs to target)`` points -- a workload's published
epochs to stabilise, or the user's ``--epochs-at B=N`` -- the noise scale of
``E(B) = E_min (1 + B / B_noise)`` (:mod:`advisor.prediction.run.epochs_model`) is fitted to them
instead of taken from the probe: least squares on log epochs over a grid of ``B_noise``
(1 to 1e9, and inf for flat data), ``E_min`` solved in closed form at each grid point. The
interval is the profile likelihood's 90 % set, ``(SSR(B_noise) - SSR_min) / sigma^2 <=
2.706`` (chi-square, one degree of freedom), with ``sigma`` the larger of
:data:`SIGMA_LOG_EPOCHS` (a prior) and the fit's own residual scale.

Why not the probe's ``B_simple``: it is measured at the start of training and is 1-2 orders
of magnitude below the noise scale the published figures imply, and varies 8-200x between
seeds (docs/benchmarks.md, issue #19). Points the user or the literature measured are better
evidence, so with them the probe does not measure the noise scale at all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from advisor.prediction.run.epochs_model import EpochsEstimate

# Prior scale of log epochs-to-target around the model: the seed-to-seed spread of measured
# epochs to a target (docs/benchmarks.md, "Epochs to a target on small data": e.g. 7, 8, 8
# and 4, 5, 5 epochs over three seeds), about 10 %. Published figures are whole epochs too
# (rounding alone: 2-4 % at 13-28 epochs).
SIGMA_LOG_EPOCHS = 0.10
CHI2_90_1DOF = 2.706
Z_90 = 1.645  # two-sided 90 % normal quantile
# How well the fit predicts a point it has not seen (benchmarks/epochs_fit.py, recorded in
# docs/benchmarks.md): each published figure predicted from the other three.
FIT_CHECK = (
    "Fitted epochs: B_noise is fitted to the known points; left out one at a time, each "
    "published figure (fcn, simple-cnn at batch 256-2048) was predicted from the other three "
    "within -6.3 % to +11.4 %, and from two of them within -12.5 % to +25.0 %."
)
_GRID = np.concatenate([np.logspace(0.0, 9.0, 3601), [np.inf]])


@dataclass(frozen=True)
class NoiseScaleFit:
    """``B_noise`` fitted to known points, with its 90 % profile-likelihood interval."""

    points: tuple[tuple[int, float], ...]
    value: float  # best fit (inf: the points fit best with no batch-size effect)
    low: float
    high: float
    sigma: float  # the log-epochs scale the interval used
    rms_log_residual: float

    def epochs_at(self, batch_size: float) -> tuple[float, float, float]:
        """Fitted epochs at ``batch_size``: the best fit, and a 90 % prediction interval (the
        curve's range over the ``B_noise`` interval, widened by the scatter ``sigma`` of one
        run about the curve)."""
        lem, ssr = _profile(self.points)
        accepted = _accepted(ssr, self.sigma)
        curve = np.exp(lem) * (1.0 + batch_size / _GRID)
        best = float(curve[int(np.argmin(ssr))])
        scatter = math.exp(Z_90 * self.sigma)
        low, high = float(curve[accepted].min()), float(curve[accepted].max())
        return best, low / scatter, high * scatter


def fit_noise_scale(points: Mapping[int, float]) -> NoiseScaleFit:
    """Fit ``B_noise`` to two or more ``{batch size: epochs}`` points."""
    if len(points) < 2:
        raise ValueError(f"fitting B_noise needs two or more points, but got {len(points)}")
    if any(b <= 0 or not e > 0 for b, e in points.items()):
        raise ValueError(f"batch sizes and epochs must be > 0, but got {dict(points)}")
    return _fit(tuple(sorted((int(b), float(e)) for b, e in points.items())))


@lru_cache(maxsize=64)
def _fit(points: tuple[tuple[int, float], ...]) -> NoiseScaleFit:
    _, ssr = _profile(points)
    best = int(np.argmin(ssr))
    dof = len(points) - 2
    resid = math.sqrt(float(ssr[best]) / len(points))
    sigma = max(SIGMA_LOG_EPOCHS, math.sqrt(float(ssr[best]) / dof)) if dof else SIGMA_LOG_EPOCHS
    b_ok = _GRID[_accepted(ssr, sigma)]
    return NoiseScaleFit(
        points, float(_GRID[best]), float(b_ok.min()), float(b_ok.max()), sigma, resid
    )


@lru_cache(maxsize=64)
def _profile(points: tuple[tuple[int, float], ...]) -> tuple[np.ndarray, np.ndarray]:
    """Over the ``B_noise`` grid: the best ``log E_min`` (closed form) and the sum of squared
    log-epochs residuals it leaves (cached: a screen asks for every candidate; read only)."""
    b = np.array([p[0] for p in points], dtype=float)
    log_e = np.log(np.array([p[1] for p in points], dtype=float))
    residual = log_e[None, :] - np.log1p(b[None, :] / _GRID[:, None])
    lem = residual.mean(axis=1)
    return lem, ((residual - lem[:, None]) ** 2).sum(axis=1)


def _accepted(ssr: np.ndarray, sigma: float) -> np.ndarray:
    """The grid points inside the 90 % profile-likelihood set."""
    return np.asarray((ssr - ssr.min()) / sigma**2 <= CHI2_90_1DOF)


def fitted_epochs(fit: NoiseScaleFit, batch_size: int, basis: str) -> EpochsEstimate:
    """Epochs at ``batch_size`` from the fitted model: "fitted" at a known point (the known
    figure in ``known``), "predicted" elsewhere; whole epochs by rounding, as the points are
    whole epochs. ``basis`` names the points (e.g. "published epochs to stabilise")."""
    value, low, high = fit.epochs_at(batch_size)
    known = dict(fit.points)
    text = (
        f"fitted to {len(known)} {basis}: B_noise = {_fmt(fit.value)} "
        f"({_fmt(fit.low)}-{_fmt(fit.high)}, 90 %)"
    )
    return EpochsEstimate(
        batch_size,
        max(1, math.floor(value + 0.5)),
        value,
        low,
        high,
        "fitted" if batch_size in known else "predicted",
        text,
        fit.value,
        "fit",
        known.get(batch_size),
    )


def _fmt(x: float) -> str:
    return "inf" if not math.isfinite(x) else f"{x:,.0f}" if x >= 10 else f"{x:.2g}"
