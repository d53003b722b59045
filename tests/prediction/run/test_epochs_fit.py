"""Issue #19: the epochs model fitted to known (batch size, epochs) points."""

from __future__ import annotations

import math

import pytest
from advisor.search_spaces import workloads

from advisor.prediction.run.epochs_fit import fit_noise_scale, fitted_epochs
from advisor.prediction.run.epochs_model import epochs_ratio


def curve(e_min: float, b_noise: float, batches: list[int]) -> dict[int, float]:
    return {b: e_min * (1 + b / b_noise) for b in batches}


@pytest.mark.parametrize("b_noise", [300.0, 2_000.0, 20_000.0])
def test_recovers_a_known_noise_scale_from_points_on_the_curve(b_noise: float) -> None:
    fit = fit_noise_scale(curve(10.0, b_noise, [128, 512, 2048, 8192]))
    assert fit.value == pytest.approx(b_noise, rel=0.01)  # the grid's step is 0.58 %
    assert fit.low <= b_noise <= fit.high
    value, low, high = fit.epochs_at(4096)
    assert value == pytest.approx(10.0 * (1 + 4096 / b_noise), rel=0.01)
    assert low < value < high


def test_flat_points_fit_no_batch_size_effect() -> None:
    fit = fit_noise_scale({256: 10, 1024: 10, 4096: 10})
    assert math.isinf(fit.value) and math.isinf(fit.high)
    assert fit.epochs_at(16_384)[0] == pytest.approx(10.0)


def test_two_points_pin_the_curve_and_the_interval_widens_away_from_them() -> None:
    known = curve(8.0, 1_000.0, [256, 1024])
    fit = fit_noise_scale(known)
    assert fit.value == pytest.approx(1_000.0, rel=0.01)
    assert fit.rms_log_residual == pytest.approx(0.0, abs=1e-3)
    near = fit.epochs_at(512)
    far = fit.epochs_at(8192)
    assert far[2] / far[1] > near[2] / near[1]  # extrapolation is less certain
    assert near[0] == pytest.approx(known[256] * epochs_ratio(512, 256, 1_000.0), rel=0.01)


@pytest.mark.parametrize("name", ["fcn", "simple-cnn"])
def test_each_published_figure_is_predicted_from_the_other_three(name: str) -> None:
    """The check FIT_CHECK states: leave one published point out, predict it within 12 %,
    inside the 90 % prediction interval."""
    known = workloads.get(name).epochs_to_stabilise
    for left_out in known:
        fit = fit_noise_scale({b: e for b, e in known.items() if b != left_out})
        value, low, high = fit.epochs_at(left_out)
        assert abs(value / known[left_out] - 1) < 0.12, (name, left_out, value)
        assert low <= known[left_out] <= high


def test_fitted_epochs_at_the_published_points_round_to_them() -> None:
    known = workloads.get("fcn").epochs_to_stabilise  # 13, 14, 14, 16 (docs/method.md 2.3)
    fit = fit_noise_scale(known)
    rows = {b: fitted_epochs(fit, b, "published figures") for b in (*known, 4096)}
    assert {b: rows[b].epochs for b in known} == known
    assert all(rows[b].source == "fitted" for b in known)
    assert rows[4096].source == "predicted" and rows[4096].b_noise_from == "fit"
    assert rows[4096].epochs > known[2048]  # more epochs at a larger batch
    assert "fitted to 4 published figures" in rows[4096].basis
    assert rows[2048].known == 16 and rows[4096].known is None


@pytest.mark.parametrize(
    "points",
    [{256: 13}, {}, {256: 13, 512: 0}, {0: 13, 512: 14}],
)
def test_bad_points_are_refused(points: dict[int, float]) -> None:
    with pytest.raises(ValueError):
        fit_noise_scale(points)


def test_default_epochs_count_as_suggest_does() -> None:
    """`advisor predict`, `estimate` and `submit` use the same run lengths as `suggest`."""
    from advisor.evaluation.workload import default_epochs

    fcn = workloads.get("fcn")
    assert [default_epochs(fcn, b) for b in (256, 512, 1024, 2048)] == [13, 14, 14, 16]
    assert default_epochs(fcn, 4096) == 19  # the fit, not the nearest published figure (16)
    assert default_epochs(workloads.get("resnet50"), 256) == 30  # nothing published: default
