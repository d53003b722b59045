"""The short-run search of ``suggest --tune`` on a fake trainer and clock (advisor.accuracy)."""

from __future__ import annotations

from collections import Counter

import optuna
import pytest
from advisor.search_spaces.space import FloatParam
from short_runs import Clock, fake_trainer

from advisor.accuracy.evidence import best_of
from advisor.accuracy.lr_rule import lr_rule, recipe
from advisor.accuracy.plan import TunePlan
from advisor.accuracy.search import ShortRunSearch
from advisor.accuracy.trials import accuracy_trials
from advisor.records import is_accuracy_trial

PARAMS = [FloatParam("lr", 0.01, 0.3, log=True), FloatParam("momentum", 0.5, 0.99)]


def plan(pruner: str = "successive-halving", replicates: int = 2) -> TunePlan:
    return TunePlan(
        "fcn", (32, 64, 128), 64, 1024, 512, 6, 40512, pruner=pruner, replicates=replicates,
        estimated_run_s=24.0,
    )  # fmt: skip


def search(
    study: optuna.Study, clock: Clock, budget: float = 240.0, p: TunePlan | None = None, **kw
) -> ShortRunSearch:
    trainer = kw.pop("train", None) or fake_trainer(clock)
    return ShortRunSearch(
        study, p or plan(), PARAMS, budget, rule=lr_rule("fcn", 8000.0, "fitted"),
        recipe=recipe("fcn"), train=trainer, clock=clock, **kw,
    )  # fmt: skip


@pytest.fixture(autouse=True)
def quiet() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_every_run_reports_each_check_and_the_pruner_stops_most() -> None:
    study, clock = optuna.create_study(), Clock()
    result = search(study, clock).run()
    trials = study.get_trials()
    assert trials and all(is_accuracy_trial(t) for t in trials)
    states = Counter(t.state for t in trials)
    assert states[optuna.trial.TrialState.PRUNED] > states[optuna.trial.TrialState.COMPLETE] > 0
    for t, a in zip(trials, accuracy_trials(study), strict=True):
        # one intermediate value per check, the validation error of its curve
        assert sorted(t.intermediate_values) == list(range(1, a.checks + 1))
        assert [1 - v for _, v in a.curve] == pytest.approx(
            list(t.intermediate_values.values()), abs=1e-5
        )
        if t.state == optuna.trial.TrialState.COMPLETE:
            assert a.checks == 24 and t.value == pytest.approx(t.intermediate_values[24])
        if t.state == optuna.trial.TrialState.PRUNED:
            assert a.ended in ("pruned", "time budget") and a.checks < 24
    assert clock.t <= 240.0 and result.spent_s == pytest.approx(clock.t)
    assert result.new == len(trials)


def test_the_learning_rate_rule_runs_first_at_each_batch_size() -> None:
    study, clock = optuna.create_study(), Clock()
    search(study, clock).run()
    rule = lr_rule("fcn", 8000.0, "fitted")
    assert rule is not None
    first = accuracy_trials(study)[:3]
    assert [t.role for t in first] == ["rule"] * 3
    assert [t.batch_size for t in first] == [64, 32, 128]  # the recommended one first
    assert first[0].ended == "finished"  # the pruner promotes a competition's first run
    for t in first:
        assert t.params["lr"] == pytest.approx(rule.lr_at(t.batch_size))
        assert t.params["momentum"] == pytest.approx(0.9)  # the recipe's


def test_the_best_is_trained_again_with_other_seeds() -> None:
    study, clock = optuna.create_study(), Clock()
    search(study, clock, budget=400.0).run()
    trials = accuracy_trials(study)
    best = best_of(trials, 64)
    assert best is not None and best.batch_size == 64 and best.ended == "finished"
    seeds = [t for t in trials if t.role == "seed"]
    assert [t.seed for t in seeds] == [1, 2]
    assert all(t.of == best.number and t.params == best.params for t in seeds)


def test_the_same_budget_again_adds_nothing_and_more_time_goes_on() -> None:
    study, clock = optuna.create_study(), Clock()
    search(study, clock).run()
    n = len(study.trials)
    again = search(study, clock).run()
    assert again.new == 0 and len(study.trials) == n
    more = search(study, clock, budget=360.0).run()
    assert more.new > 0
    assert sum(t.wall_s for t in accuracy_trials(study)) <= 360.0


def test_failed_runs_are_kept_with_their_reason() -> None:
    study, clock = optuna.create_study(), Clock()
    trainer = fake_trainer(
        clock,
        refuse=lambda h: "lr too large for this builder" if h["lr"] > 0.15 else None,
        diverge=lambda h: h["lr"] < 0.015,
    )
    search(study, clock, train=trainer).run()
    failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]
    reasons = {a.error for a in accuracy_trials(study) if a.ended == "failed"}
    assert failed and len(reasons) >= 1
    assert all(r and ("ValueError: lr too large" in r or "diverged" in r) for r in reasons)


def test_a_run_in_progress_stops_at_the_time_budget() -> None:
    study, clock = optuna.create_study(), Clock()
    search(study, clock, budget=20.0).run()  # less than one 24-check run
    ended = [a.ended for a in accuracy_trials(study)]
    assert "time budget" in ended and clock.t <= 20.0
    stopped = [t for t in study.trials if t.user_attrs["accuracy_trial"]["ended"] == "time budget"]
    assert all(t.state == optuna.trial.TrialState.PRUNED for t in stopped)


def test_a_pareto_study_holds_the_runs_with_a_value_per_objective() -> None:
    study, clock = optuna.create_study(directions=["minimize", "minimize"]), Clock()
    search(study, clock).run()
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert done and all(len(t.values) == 2 and t.values[0] == t.values[1] for t in done)
    assert any(t.intermediate_values for t in study.trials)


def test_the_recommended_batch_size_takes_every_other_turn() -> None:
    study, clock = optuna.create_study(), Clock()
    search(study, clock, budget=400.0).run()
    runs = [a.batch_size for a in accuracy_trials(study) if a.role == "search"]
    assert runs[:4] == [64, 32, 64, 128] and 2 * runs.count(64) >= len(runs)


def test_hyperband_prunes_too() -> None:
    study, clock = optuna.create_study(), Clock()
    search(study, clock, p=plan("hyperband")).run()
    assert any(t.state == optuna.trial.TrialState.PRUNED for t in study.trials)


def test_ctrl_c_keeps_the_run_as_failed_and_stops() -> None:
    study, clock = optuna.create_study(), Clock()

    def interrupted(request, on_check):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        search(study, clock, train=interrupted).run()
    (t,) = study.trials
    assert t.state == optuna.trial.TrialState.FAIL
    assert t.user_attrs["accuracy_trial"]["ended"] == "interrupted"
