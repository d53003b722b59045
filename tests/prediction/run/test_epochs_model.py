"""Epochs per batch size from the noise scale: the formula, its anchor and its interval."""

from __future__ import annotations

import math

import pytest
from advisor.probes.gradient_noise import NoiseScale

from advisor.prediction.run.epochs_model import (
    EpochsAnchor,
    epochs_ratio,
    predict_epochs,
    scaled_lr,
)


def noise(value: float, low: float, high: float) -> NoiseScale:
    return NoiseScale(value, low, high, 1.0, value, 128, 256, 8)


def test_ratio_formula() -> None:
    # (1 + 2048/1000) / (1 + 256/1000)
    assert epochs_ratio(2048, 256, 1000.0) == pytest.approx(3.048 / 1.256)
    assert epochs_ratio(256, 256, 10.0) == 1.0
    assert epochs_ratio(4096, 256, math.inf) == 1.0  # no noise: epochs do not grow
    # B << B_noise: flat; B >> B_noise: linear in B
    assert epochs_ratio(64, 32, 1e6) == pytest.approx(1.0, abs=1e-4)
    assert epochs_ratio(2048, 1024, 1.0) == pytest.approx(2049 / 1025)
    with pytest.raises(ValueError):
        epochs_ratio(0, 256, 100.0)
    with pytest.raises(ValueError):
        epochs_ratio(256, 256, 0.0)


def test_prediction_from_an_anchor_with_interval() -> None:
    anchor = EpochsAnchor(256, 13, "given", "published (docs/method.md 2.3)")
    est = predict_epochs(anchor, 2048, noise(1000.0, 500.0, 4000.0))
    assert est.source == "predicted"
    assert est.value == pytest.approx(13 * 3.048 / 1.256)
    assert est.epochs == math.ceil(est.value)
    # a smaller noise scale means more epochs at a larger batch; the noise scale grows in
    # training, so the low end is the anchor's epochs (B_noise = inf), not the 4000 bound's
    assert est.low == pytest.approx(13.0)
    assert est.high == pytest.approx(13 * epochs_ratio(2048, 256, 500.0))
    assert "B_noise = 1000" in est.basis
    # below the anchor's batch fewer epochs are needed
    small = predict_epochs(anchor, 64, noise(1000.0, 500.0, 4000.0))
    assert small.value < 13 and small.low <= small.value <= small.high
    assert small.low == pytest.approx(13 * epochs_ratio(64, 256, 500.0))
    assert small.high == pytest.approx(13.0)  # up to B_noise = inf below the anchor too


def test_anchor_batch_keeps_its_source_and_missing_noise_is_said() -> None:
    anchor = EpochsAnchor(512, 20, "measured", "short measured run")
    at = predict_epochs(anchor, 512, noise(100.0, 50.0, 200.0))
    assert (at.epochs, at.source) == (20, "measured")
    none = predict_epochs(anchor, 1024, None)
    assert (none.epochs, none.source) == (20, "given")
    assert "no gradient noise scale" in none.basis
    unresolved = predict_epochs(anchor, 1024, noise(math.inf, 3000.0, math.inf))
    assert unresolved.value == 20 and unresolved.high > 20
    assert unresolved.to_dict()["b_noise"] == "inf"


def test_learning_rate_rule() -> None:
    # linear for B << B_noise, flat for B >> B_noise, square root for adaptive optimisers
    assert scaled_lr(0.1, 256, 512, 1e9) == pytest.approx(0.2, rel=1e-5)
    assert scaled_lr(0.1, 256, 512, 1.0) == pytest.approx(0.1 * 257 / 256 * 512 / 513)
    assert scaled_lr(1.0, 256, 1024, 1e9, adaptive=True) == pytest.approx(2.0, rel=1e-5)
    assert scaled_lr(0.1, 256, 128, math.inf) == pytest.approx(0.05)


def test_anchor_validation() -> None:
    with pytest.raises(ValueError):
        EpochsAnchor(0, 10, "given", "x")
    with pytest.raises(ValueError):
        EpochsAnchor(256, 0, "given", "x")
