"""What --tune's time buys (advisor.accuracy.plan) and the learning-rate rule (lr_rule)."""

from __future__ import annotations

import math

import pytest

from advisor.accuracy.lr_rule import agreement, lr_rule
from advisor.accuracy.plan import (
    CHECKS_PER_EPOCH,
    RUN_SHARE,
    SampleCost,
    TunePlan,
    neighbours,
    plan_tuning,
)
from advisor.errors import AdvisorError

COST = SampleCost(train_s=1 / 400, val_s=1 / 1200, basis="test")  # 400 samples/s training


def test_neighbours_are_the_batch_sizes_next_to_the_recommended_one() -> None:
    assert neighbours(512, [256, 512, 1024, 2048]) == [256, 512, 1024]
    assert neighbours(256, [256, 512, 1024, 2048]) == [256, 512]
    assert neighbours(2048, [256, 512, 1024, 2048]) == [1024, 2048]


def test_a_full_length_short_run_takes_a_sixth_of_the_time() -> None:
    p = plan_tuning(180, "fcn", 512, [256, 512, 1024, 2048], 40512, 212, COST)
    assert p.batch_sizes == (256, 512, 1024)
    assert p.n_train >= CHECKS_PER_EPOCH * 1024  # a step per check at the largest batch
    assert p.n_val == 212  # the workload's whole validation set (it is small)
    assert p.estimated_run_s <= 180 * RUN_SHARE * 1.05
    assert math.ceil(p.n_train / 1024) >= p.checks_per_epoch


def test_a_neighbour_that_cannot_get_a_step_per_check_is_left_out() -> None:
    p = plan_tuning(60, "fcn", 512, [256, 512, 1024, 2048], 40512, 212, COST)
    assert 1024 not in p.batch_sizes and 512 in p.batch_sizes
    assert p.left_out and "batch 1024" in p.left_out[0]


def test_too_little_time_is_refused_with_the_time_that_works() -> None:
    with pytest.raises(AdvisorError) as err:
        plan_tuning(10, "fcn", 2048, [256, 512, 1024, 2048], 40512, 212, COST)
    assert "too short for batch 2048" in err.value.problem
    needed = err.value.fix.removeprefix("give at least --tune ").rstrip(".")
    from advisor.durations import parse_duration

    ok = plan_tuning(parse_duration(needed), "fcn", 2048, [256, 512, 1024, 2048], 40512, 212, COST)
    assert ok.batch_sizes == (1024, 2048) and ok.epochs >= 1


def test_the_plan_keeps_to_the_dataset_and_round_trips() -> None:
    p = plan_tuning(3600, "simple-cnn", 64, [32, 64, 128], 1024, 512, COST)
    assert p.n_train == 1024 and p.epochs == 4  # the whole set, the longest short run
    again = TunePlan.from_dict(p.to_dict())
    assert again == p and again.id == p.id


def test_no_validation_data_is_refused() -> None:
    with pytest.raises(AdvisorError, match="validation"):
        plan_tuning(600, "fcn", 64, [32, 64, 128], 4096, 0, COST)


def test_the_rule_starts_from_the_recipe() -> None:
    fcn = lr_rule("fcn", 8000.0, "fitted")
    assert fcn is not None and not fcn.adaptive and (fcn.lr_ref, fcn.batch_ref) == (0.1, 256)
    assert fcn.lr_at(256) == pytest.approx(0.1)
    # SGD: (1 + B_noise/B_ref) / (1 + B_noise/B)
    assert fcn.lr_at(512) == pytest.approx(0.1 * (1 + 8000 / 256) / (1 + 8000 / 512))
    cnn = lr_rule("simple-cnn", None, "")
    assert cnn is not None and cnn.adaptive and cnn.optimizer == "adadelta"
    assert cnn.lr_at(1024) == pytest.approx(1.0 * math.sqrt(1024 / 256))  # linear factor, sqrt


def test_agreement_is_within_a_factor_of_two() -> None:
    assert agreement(0.19, 0.1)["agrees"] and not agreement(0.21, 0.1)["agrees"]
    assert agreement(0.051, 0.1)["agrees"] and not agreement(0.049, 0.1)["agrees"]
