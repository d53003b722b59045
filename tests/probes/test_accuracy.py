"""Short runs that report a validation metric every fraction of an epoch (probes/accuracy.py)."""

from __future__ import annotations

import pytest
from advisor.probes.short_run import ShortRunRequest, check_steps


def test_checks_fall_after_equal_fractions_of_an_epoch() -> None:
    assert check_steps(8, 4) == [2, 4, 6, 8]
    assert check_steps(5, 4) == [1, 2, 4, 5]  # round(k * 5 / 4)
    assert check_steps(4, 4) == [1, 2, 3, 4]
    with pytest.raises(ValueError):
        check_steps(3, 4)


def test_a_request_is_checked() -> None:
    with pytest.raises(ValueError):
        ShortRunRequest("fcn", 0, {}, 64, 32, 1)
    assert ShortRunRequest("fcn", 16, {}, 64, 32, 2, 4).checks == 8


def request(**kw: object) -> ShortRunRequest:
    base: dict[str, object] = dict(
        workload="fcn", batch_size=16, hyperparameters={"lr": 0.05}, n_train=64, n_val=32,
        epochs=1, checks_per_epoch=4, seed=0, threads=1,
    )  # fmt: skip
    base.update(kw)
    return ShortRunRequest(**base)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_short_run_reports_each_check_and_stops_when_told() -> None:
    from advisor.probes.accuracy import short_run

    seen: list[float] = []
    full = short_run(request(), lambda c: seen.append(c.epochs) is None)
    assert full.ended == "finished" and seen == [0.25, 0.5, 0.75, 1.0]
    assert all(c.metric == "val_accuracy" and 0 <= c.value <= 1 for c in full.checks)
    assert full.steps == 4 and full.wall_s >= full.build_s > 0
    stopped = short_run(request(), lambda c: c.index < 2)
    assert stopped.ended == "stopped" and len(stopped.checks) == 2


@pytest.mark.slow
def test_the_checks_do_not_change_the_training() -> None:
    """Validation passes keep torch's random state: the epoch-end accuracy and loss are the
    same with four checks per epoch and with one."""
    from advisor.probes.accuracy import short_run

    four = short_run(
        request(epochs=2, hyperparameters={"lr": 0.05, "dropout": 0.3}), lambda c: True
    )
    one = short_run(
        request(epochs=2, checks_per_epoch=1, hyperparameters={"lr": 0.05, "dropout": 0.3}),
        lambda c: True,
    )
    assert [c.val_loss for c in one.checks] == [four.checks[3].val_loss, four.checks[7].val_loss]


@pytest.mark.slow
def test_a_diverging_run_ends_as_failed_and_a_bad_value_raises() -> None:
    from advisor.probes.accuracy import measure_cost, short_run

    diverged = short_run(request(hyperparameters={"lr": 1e12, "momentum": 0.99}), lambda c: True)
    assert diverged.ended == "failed" and "diverged" in (diverged.error or "")
    with pytest.raises(ValueError, match="dropout"):
        short_run(request(hyperparameters={"dropout": 1.5}), lambda c: True)
    train_s, val_s = measure_cost("fcn", 16, 32, threads=1)
    assert train_s > 0 and val_s > 0
