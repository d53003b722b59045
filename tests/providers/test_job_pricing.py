"""Issue #14: one pricing path for the whole job -- start-up overheads + training, the spot
overhead on the training only, the billing rule once on the billed total, intervals adding
their terms' bounds, and no start-up on the local machine."""

from __future__ import annotations

from dataclasses import astuple

import pytest
from advisor.probes.result import PhaseTimes
from advisor.providers.catalog import load, local_machine
from advisor.providers.overheads import PRIOR, Overhead, RunOverheads, run_overheads
from advisor.providers.pricing import BillingRule, price_run, usd

from advisor.errors import AdvisorError
from advisor.intervals import Interval
from advisor.options import SuggestOptions, workload_info
from advisor.prediction.run.iteration_model import estimate, priced


def _one_term(seconds: Interval, billed: bool, rule: BillingRule) -> RunOverheads:
    return RunOverheads("test", (Overhead("pull", seconds, billed, PRIOR, "prior: test"),), rule)


def test_the_minimum_applies_to_start_up_plus_training_not_to_each() -> None:
    per_s_min_60 = BillingRule(1.0, 60.0, "test")
    alone = price_run(Interval.exact(10.0), 3.6, service="ec2")
    assert alone.billed == Interval(60.0, 60.0, 60.0)  # 10 s training alone: the one-minute minimum
    over = _one_term(Interval(45, 20, 120), True, per_s_min_60)
    job = price_run(Interval.exact(10.0), 3.6, overheads=over)
    # 45 + 10 = 55 s billed -> the minimum (60); the high bound 120 + 10 = 130 s is above it
    assert job.billed == Interval(60.0, 60.0, 130.0)
    assert astuple(job.cost) == pytest.approx((0.06, 0.06, 0.13))
    job = price_run(Interval.exact(20.0), 3.6, overheads=over)
    assert job.billed.value == 65.0  # 45 + 20 = 65 s: above the minimum, per second
    assert job.runtime == Interval(65.0, 40.0, 140.0) and job.startup == Interval(45.0, 20.0, 120.0)


def test_the_increment_rounds_the_total_once() -> None:
    thirty = BillingRule(30.0, 30.0, "test")
    over = _one_term(Interval(50, 50, 50), True, thirty)
    job = price_run(Interval.exact(5.0), 36.0, overheads=over)
    # 50 + 5 = 55 s -> 60 s billed; rounding each term apart would bill 60 + 30 = 90 s
    assert job.billed.value == 60.0
    assert job.cost.value == pytest.approx(usd(60.0, 36.0))


def test_unbilled_start_up_adds_time_but_not_cost() -> None:
    rule = BillingRule(1.0, 0.0, "test")
    over = _one_term(Interval(90, 45, 300), False, rule)  # e.g. SageMaker's provisioning
    job = price_run(Interval(20.0, 15.0, 30.0), 36.0, overheads=over)
    assert job.runtime == Interval(110.0, 60.0, 330.0)
    assert job.billed == Interval(20.0, 15.0, 30.0)
    assert job.cost.value == pytest.approx(usd(20.0, 36.0))


def test_spot_overhead_applies_to_the_training_only() -> None:
    over = _one_term(Interval(60, 20, 180), True, BillingRule(1.0, 0.0, "test"))
    job = price_run(Interval(100.0, 90.0, 110.0), 1.0, spot=True, overheads=over)
    assert astuple(job.training) == pytest.approx((110.0, 90.0, 143.0))  # +10 %, high +30 %
    assert astuple(job.runtime) == pytest.approx((170.0, 110.0, 323.0))
    notes = job.notes()
    assert notes["spot_restart_overhead"] == {"expected": 0.10, "high": 0.30}
    assert notes["overheads"]["startup_s"] == {"value": 60.0, "low": 20.0, "high": 180.0}
    assert notes["overheads"]["training_s"]["value"] == pytest.approx(110.0)


def test_a_priors_wide_interval_widens_the_runs() -> None:
    sagemaker = run_overheads(load().get("ml.g5.xlarge"))
    train = Interval(20.0, 18.0, 22.0)
    job = price_run(train, 1.0, service="sagemaker", overheads=sagemaker)
    assert job.runtime.low == pytest.approx(sagemaker.wall.low + 18.0)
    assert job.runtime.high == pytest.approx(sagemaker.wall.high + 22.0)
    assert job.runtime.high - job.runtime.low > 10 * (train.high - train.low)
    assert job.runtime.value > 5 * train.value  # a 20 s run: the start-up dominates


def test_the_local_machine_has_no_start_up_even_with_data() -> None:
    local = run_overheads(local_machine(), data_bytes=5e9)
    assert local.terms == ()
    job = price_run(Interval(100.0, 90.0, 110.0), 0.0, service="local", overheads=local)
    assert job.runtime == Interval(100.0, 90.0, 110.0) and job.startup == Interval(0.0, 0.0, 0.0)
    assert job.cost == Interval(0.0, 0.0, 0.0)


def test_iteration_model_and_run_overheads_price_through_price_run() -> None:
    ec2 = run_overheads(load().get("p3.2xlarge"), data_bytes=1e9)
    runtime, cost, notes = priced(Interval(30.0, 25.0, 40.0), 3.06, service="ec2", overheads=ec2)
    job = price_run(Interval(30.0, 25.0, 40.0), 3.06, service="ec2", overheads=ec2)
    assert runtime == job.runtime
    assert cost == job.cost
    assert ec2.cost(Interval(30.0, 25.0, 40.0), 3.06) == job.cost
    assert ec2.billed_run(Interval(30.0, 25.0, 40.0)) == job.billed
    # issue #27: a VM pays the image pull too, as a managed job does
    phases = [t["phase"] for t in notes["overheads"]["terms"]]
    assert phases == ["VM boot", "image pull + container start", "data download"]
    # the epoch sweep's estimate, given the overheads, is the whole job with a start-up term
    phases = PhaseTimes(*(Interval.exact(x) for x in (2.0, 0.5, 0.1, 1.0, 1.0)), "measured")
    est = estimate(phases, 1000, 100, 2, 100, 3.06, service="ec2", overheads=ec2)
    plain = estimate(phases, 1000, 100, 2, 100)
    assert est.runtime.value == pytest.approx(plain.runtime.value + ec2.wall.value)
    assert est.breakdown["startup"] == pytest.approx(ec2.wall.value)


def test_workload_data_size_for_the_download_term() -> None:
    fcn = workload_info(SuggestOptions("fcn"))
    assert fcn.data_bytes == 4 * 64 * 64 * (40_512 + 212)  # published sizes, fp32 1x64x64
    assert "modelled" in fcn.data_basis
    assert workload_info(SuggestOptions("fcn", data_gb=2.0)).data_bytes == 2e9
    user = workload_info(SuggestOptions("my.mod:build", n_train=1000))
    assert user.data_bytes == 0.0  # unknown: the term is left out (the report says so)
    assert workload_info(SuggestOptions("my.mod:build", n_train=10, data_gb=1)).data_bytes == 1e9
    with pytest.raises(AdvisorError, match="--data-gb"):
        SuggestOptions("fcn", data_gb=-1.0)


def test_predict_sizes_the_download_as_suggest_does() -> None:
    from advisor.evaluation.predict_api import data_size

    fcn = workload_info(SuggestOptions("fcn"))
    assert data_size("fcn", 40_512, 212, None) == (fcn.data_bytes, fcn.data_basis)
    assert data_size("my.mod:build", 1000, 100, None) == (0.0, "")
    assert data_size("my.mod:build", 1000, 100, 0.5) == (5e8, "--data-gb")
    with pytest.raises(AdvisorError, match="--data-gb"):
        data_size("fcn", 1, 1, float("nan"))
