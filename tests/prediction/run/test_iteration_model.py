"""The iteration-time model's formulas on hand-computed cases (docs/method.md section 3)."""

from __future__ import annotations

import math

import pytest
from advisor.probes.result import PhaseTimes, ProbeResult

from advisor.intervals import Interval
from advisor.prediction.run import iteration_model as im


def exact_phases(init: float, t1: float, t2: float, v1: float, v2: float) -> PhaseTimes:
    e = Interval.exact
    return PhaseTimes(e(init), e(t1), e(t2), e(v1), e(v2))


def test_iteration_formula_with_validation_hand_computed() -> None:
    # N_it = ceil(1000 / 100) = 10; T = 5 + [2 + 9*0.5 + 3] + (4 - 1) * [10*0.5 + 1] = 32.5
    est = im.estimate(
        exact_phases(5, 2, 0.5, 3, 1), n_train=1000, n_val=50, epochs=4, batch_size=100
    )
    assert est.iterations_per_epoch == 10
    assert est.runtime.value == pytest.approx(32.5)
    assert est.breakdown == pytest.approx(
        {"init": 5.0, "first_iteration": 2.0, "steady_iterations": 39 * 0.5, "validation": 6.0}
    )
    assert est.formula == "iteration, with validation"
    assert est.cost is None


def test_iteration_formula_partial_last_batch_rounds_up() -> None:
    # N_it = ceil(1001 / 100) = 11; without validation T = 1 + 1 + (2*11 - 1) * 0.1 = 4.1
    est = im.estimate(exact_phases(1, 1, 0.1, 9, 9), 1001, 10, 2, 100, validation=False)
    assert est.iterations_per_epoch == 11
    assert est.runtime.value == pytest.approx(4.1)
    assert est.breakdown["validation"] == 0.0
    assert est.formula == "iteration, without validation"


def test_no_validation_set_means_no_validation_term() -> None:
    est = im.estimate(exact_phases(1, 1, 0.1, 9, 9), 1000, 0, 2, 100)
    assert est.runtime.value == pytest.approx(1 + 1 + 19 * 0.1)


def test_cost_is_runtime_times_price() -> None:
    est = im.estimate(exact_phases(0, 0, 1.0, 0, 0), 3600, 0, 1, 1, price_per_hour=3.06)
    # 3600 iterations of 1 s, first one 0 s: T = 3599 s
    assert est.runtime.value == pytest.approx(3599.0)
    assert est.cost is not None
    assert est.cost.value == pytest.approx(3599.0 * 3.06 / 3600)


def test_epoch_formula_hand_computed() -> None:
    # T = 10 + 60 + (15 - 1) * 50 = 770
    est = im.estimate_from_epochs(10.0, 60.0, 50.0, 15, price_per_hour=1.8)
    assert est.runtime.value == pytest.approx(770.0)
    assert est.breakdown == pytest.approx(
        {"init": 10.0, "first_epoch": 60.0, "later_epochs": 700.0}
    )
    assert est.cost is not None and est.cost.value == pytest.approx(770 * 1.8 / 3600)
    assert est.formula == "epoch"


def test_interval_bounds_add_with_multipliers() -> None:
    phases = PhaseTimes(
        Interval(5, 4, 6),
        Interval(2, 1, 3),
        Interval(0.5, 0.4, 0.7),
        Interval(3, 3, 3),
        Interval(1, 0.5, 1.5),
    )
    est = im.estimate(phases, 1000, 50, 4, 100)
    # low = 4 + 1 + 39*0.4 + 3 + 3*0.5 = 25.1 ; high = 6 + 3 + 39*0.7 + 3 + 3*1.5 = 43.8
    assert est.runtime.low == pytest.approx(25.1)
    assert est.runtime.high == pytest.approx(43.8)
    assert est.runtime.value == pytest.approx(32.5)


def _probe(iterations: tuple[float, ...], **kw: object) -> ProbeResult:
    base: dict = dict(
        workload="fcn",
        framework="torch",
        batch_size=100,
        device="cpu",
        threads=2,
        init_s=4.0,
        iteration_s=iterations,
        validation_s=(0.9, 0.6),
        n_train=1000,
        n_val=100,
    )
    base.update(kw)
    return ProbeResult(**base)


def test_phase_times_uses_median_of_iterations_2_to_k() -> None:
    # The first iteration (3.0) and one slow outlier (0.9) must not move t2 much.
    probe = _probe((3.0, 0.2, 0.21, 0.19, 0.9, 0.2, 0.2, 0.22, 0.18))
    ph = im.phase_times(probe)
    assert ph.t2.value == pytest.approx(0.2)
    assert ph.t2.low <= 0.2 <= ph.t2.high
    assert ph.t2.high < 0.3  # the outlier does not blow up the median's interval
    assert ph.t1.value == 3.0 and ph.init.value == 4.0
    assert ph.v1.value == 0.9 and ph.v2.value == 0.6
    assert ph.source == "measured"
    # mean of 2..k would be 0.2875: the median is the robust choice
    assert abs(ph.t2.value - 0.2) < abs(sum(probe.iteration_s[1:]) / 8 - 0.2)


def test_median_interval_is_deterministic_and_tightens_with_less_noise() -> None:
    noisy = im.median_interval([1.0, 1.3, 0.8, 1.1, 0.9, 1.2, 1.0, 0.7])
    quiet = im.median_interval([1.0, 1.01, 0.99, 1.0, 1.0, 1.02, 0.98, 1.0])
    assert noisy == im.median_interval([1.0, 1.3, 0.8, 1.1, 0.9, 1.2, 1.0, 0.7])
    assert (quiet.high - quiet.low) < (noisy.high - noisy.low)
    assert im.median_interval([2.0]) == Interval.exact(2.0)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # n = 3: the median is the 2nd of 3 draws; P(it is 1) = P(2 or 3 draws are 1) =
        # 3 (1/3)^2 (2/3) + (1/3)^3 = 7/27, the same for 3, and 13/27 for 2
        ((1.0, 2.0, 3.0), {1.0: 7 / 27, 2.0: 13 / 27, 3.0: 7 / 27}),
        # n = 2: the mean of the two draws: both 1 (1/4), one each (1/2), both 2 (1/4)
        ((1.0, 2.0), {1.0: 1 / 4, 1.5: 1 / 2, 2.0: 1 / 4}),
    ],
)
def test_bootstrap_medians_from_order_statistics_have_the_exact_distribution(
    values: tuple[float, ...], expected: dict[float, float]
) -> None:
    """Issue #50: the bootstrap medians drawn without the resamples (a resample's k-th
    smallest is sorted[floor(n U_(k))], U_(k) ~ Beta(k, n + 1 - k)) have the resampling
    bootstrap's distribution, worked out by hand for n = 3 (odd) and n = 2 (even)."""
    import numpy as np

    draws = im.bootstrap_medians(np.asarray(values), 200_000, np.random.default_rng(7))
    found, counts = np.unique(draws, return_counts=True)
    assert dict(zip(found.tolist(), (counts / draws.size).tolist(), strict=True)) == {
        k: pytest.approx(v, abs=0.005) for k, v in expected.items()
    }


def test_a_long_sample_gets_the_same_bootstrap_interval_in_fixed_memory() -> None:
    """Issue #50: 1,000,000 iteration times had the bootstrap draw 2000 x n samples (18.4 GB);
    past ``BOOTSTRAP_CELLS`` the medians come from the order statistics. Just past that
    size, both ways give the same interval (the same distribution, other random draws)."""
    import numpy as np

    values = np.random.default_rng(3).lognormal(0.0, 0.3, size=2101)
    assert values.size * im.BOOTSTRAP_RESAMPLES > im.BOOTSTRAP_CELLS
    by_order = im.median_interval(values)
    draws = np.random.default_rng(0).choice(values, size=(im.BOOTSTRAP_RESAMPLES, values.size))
    boot = np.median(draws, axis=1)
    low, high = np.quantile(boot, [0.05, 0.95])
    assert by_order.value == pytest.approx(float(np.median(values)))
    assert by_order.low == pytest.approx(low, rel=0.01)
    assert by_order.high == pytest.approx(high, rel=0.01)
    width = by_order.high - by_order.low  # narrows as 1/sqrt(n): a million samples, 1/22
    million = im.median_interval(np.random.default_rng(4).lognormal(0.0, 0.3, 1_000_000))
    assert 0 < million.high - million.low < width / 10


def test_single_sample_phases_take_the_steady_spread() -> None:
    # steady sorted 0.8 0.9 1.0 1.0 1.1 1.2: quartiles 0.925 and 1.075, median 1.0 -> 15 %
    probe = _probe((3.0, 1.0, 1.2, 0.8, 1.0, 1.1, 0.9))
    assert im.relative_spread(probe.iteration_s[1:]) == pytest.approx(0.15)
    ph = im.phase_times(probe)
    expected = 0.15
    assert ph.t1.high == pytest.approx(3.0 * (1 + expected))
    assert ph.init.low == pytest.approx(4.0 / (1 + expected))  # the spread as a factor


def test_a_spread_over_100_percent_keeps_single_phases_positive() -> None:
    # a busy machine: steady 0.1 0.1 1.0 3.0 -> quartiles 0.1 and 1.5, median 0.55: 255 %
    probe = _probe((3.0, 0.1, 1.0, 3.0, 0.1))
    rel = im.relative_spread(probe.iteration_s[1:])
    assert rel > 1.0
    ph = im.phase_times(probe)
    # the spread as a factor either way: the low end never reaches 0 s (it did at 1 - rel)
    assert ph.t1.low == pytest.approx(3.0 / (1 + rel)) and 0 < ph.init.low < ph.init.value
    assert ph.t1.high > ph.t1.value
    est = im.estimate(probe, 1000, 100, 2, 100)  # raised "runtime must be >= 0" before
    assert 0.0 <= est.runtime.low <= est.runtime.value


def test_init_rescales_data_preparation_to_the_dataset_size() -> None:
    # 1 s for 100 samples in the probe; the probe's init (4 s) is for 1000 + 100 samples.
    probe = _probe((1.0, 0.1, 0.1), data_s=1.0, data_samples=100)
    assert im.init_for_size(probe, 1000, 100) == pytest.approx(4.0)
    assert im.init_for_size(probe, 2000, 100) == pytest.approx(4.0 + 1000 * 0.01)
    est = im.estimate(probe, 2000, 100, 1, 100, validation=False)
    assert est.breakdown["init"] == pytest.approx(14.0)


def test_quiet_iterations_get_the_minimum_relative_interval() -> None:
    ph = im.phase_times(_probe((3.0, 1.0, 1.0, 1.0)))
    assert ph.t1.low == pytest.approx(3.0 / (1 + im.SINGLE_SAMPLE_MIN_REL))


def test_validation_rescales_to_another_validation_size() -> None:
    # probe: v1 = 0.9, v2 = 0.6 for its 100 validation samples; for 300: v2 = 1.8, v1 = 0.3 + 1.8
    ph = im.phase_times(_probe((1.0, 0.1, 0.1)), 1000, 300)
    assert ph.v2.value == pytest.approx(1.8)
    assert ph.v1.value == pytest.approx(2.1)


def test_failed_probe_is_refused() -> None:
    bad = ProbeResult("fcn", "torch", 10, "cpu", 1, status="oom", error="out of memory")
    with pytest.raises(ValueError, match="oom"):
        im.phase_times(bad)


def test_epoch_sweep_and_normalise() -> None:
    fast = exact_phases(10, 5, 0.1, 1, 1)  # big start-up, fast steps
    slow = exact_phases(1, 1, 0.2, 1, 1)  # cheap start-up, slow steps
    sweep_fast = im.epoch_sweep(fast, 1000, 10, 100, epochs=(20, 5, 10, 5))
    sweep_slow = im.epoch_sweep(slow, 1000, 10, 100)
    assert list(sweep_fast) == [5, 10, 20]
    # 5 epochs: fast = 10 + 5 + 49*0.1 + 5*1 = 24.9; slow = 1 + 1 + 49*0.2 + 5 = 16.8
    assert sweep_fast[5].runtime.value == pytest.approx(24.9)
    assert sweep_slow[5].runtime.value == pytest.approx(16.8)
    table = {
        "fast": {n: e.runtime.value for n, e in sweep_fast.items()},
        "slow": {n: e.runtime.value for n, e in sweep_slow.items()},
    }
    norm = im.normalise(table)
    assert norm["slow"][5] == 1.0 and norm["fast"][5] == pytest.approx(24.9 / 16.8)
    # 20 epochs: fast = 10 + 5 + 199*0.1 + 20 = 54.9; slow = 1 + 1 + 199*0.2 + 20 = 61.8
    assert norm["fast"][20] == 1.0 and norm["slow"][20] == pytest.approx(61.8 / 54.9)


def test_estimate_validates_sizes_and_serialises() -> None:
    with pytest.raises(ValueError, match="n_train=0"):
        im.estimate(exact_phases(1, 1, 1, 1, 1), 0, 0, 1, 1)
    d = im.estimate(exact_phases(1, 1, 1, 1, 1), 10, 0, 1, 5, price_per_hour=1.0).to_dict()
    assert d["runtime_s"]["value"] == pytest.approx(3.0)
    assert d["iterations_per_epoch"] == 2 and math.isclose(d["cost_usd"]["value"], 3.0 / 3600)
