"""Issue #36: fcn's short runs at the learning-rate rule's values learned and then collapsed to
chance at batch 512; the search now steps down from a collapsed rule run and the report says
what it did (fake trainer, milliseconds)."""

from __future__ import annotations

from typing import Any

import optuna
import pytest
import short_runs
from advisor.search_spaces.loader import default_space
from short_runs import Clock, fake_trainer

from advisor.accuracy.collapse import BACKOFF, backoff_values, collapsed
from advisor.accuracy.evidence import chance_band, rule_check
from advisor.accuracy.lr_rule import lr_rule, recipe
from advisor.accuracy.plan import TunePlan
from advisor.accuracy.search import ShortRunSearch
from advisor.accuracy.trials import accuracy_trials

PLAN = TunePlan("fcn", (256, 512, 1024), 512, 4096, 212, 2, 40512, estimated_run_s=8.0)
BAND = chance_band(2, PLAN.n_val)  # fcn: 2 classes


def test_a_curve_collapses_when_it_rose_above_chance_and_ended_inside_it() -> None:
    assert BAND is not None
    assert collapsed([[0.25, 0.8], [0.5, 0.84], [0.75, 0.5]], BAND, "val_accuracy")
    assert not collapsed([[0.25, 0.8], [0.5, 0.84]], BAND, "val_accuracy")  # still learning
    assert not collapsed([[0.25, 0.5], [0.5, 0.5]], BAND, "val_accuracy")  # never learned
    assert not collapsed([[0.25, 0.8], [0.5, 0.5]], None, "val_accuracy")  # classes unknown
    down = backoff_values({"lr": 0.3, "momentum": 0.9}, 0.01, 0)
    assert down is not None and down == {"lr": pytest.approx(0.1), "momentum": 0.9}
    assert backoff_values({"lr": 0.3}, 0.2, 0) == {"lr": 0.2}  # kept inside the space
    assert backoff_values({"lr": 0.3}, 0.01, 2) is None  # two steps at most


def _search(monkeypatch: pytest.MonkeyPatch, chance: float | None) -> optuna.Study:
    learns = short_runs.accuracy

    def overshoots(hps: dict[str, Any], batch: int, epochs: float, seed: int = 0) -> float:
        if float(hps.get("lr", 0.1)) > 0.15:  # learns, then falls back to chance
            return 0.84 if epochs <= 0.5 else 0.5
        return learns(hps, batch, epochs, seed, best_lr=0.07)

    monkeypatch.setattr(short_runs, "accuracy", overshoots)
    study = optuna.create_study(study_name="collapse")  # Hyperband's brackets hash the name
    params = [p for p in default_space("fcn").hyperparameters if not p.affects_runtime]
    clock = Clock()
    ShortRunSearch(
        study, PLAN, params, 200.0, rule=lr_rule("fcn", None, ""), recipe=recipe("fcn"),
        train=fake_trainer(clock), clock=clock, chance=chance,
    ).run()  # fmt: skip
    return study


def test_a_collapsed_rule_run_is_followed_by_a_step_down_and_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rule = lr_rule("fcn", None, "")
    assert rule is not None and rule.lr_at(512) == pytest.approx(0.2)  # linear: 0.1 at 256
    study = _search(monkeypatch, BAND)
    trials = accuracy_trials(study, PLAN.id)
    steps = [t for t in trials if t.role == "backoff"]
    assert {t.batch_size for t in steps} == {512, 1024}  # the rule's 0.2 and 0.4 collapse
    at512 = [t for t in steps if t.batch_size == 512]
    assert at512[0].params["lr"] == pytest.approx(0.2 / BACKOFF)
    assert not collapsed(at512[0].curve, BAND, "val_accuracy")  # it did not collapse
    assert len(at512) == 1  # one step was enough there
    rows = {r["batch_size"]: r for r in rule_check(trials, rule, BAND)["by_batch"]}  # type: ignore[index]
    assert "collapsed" not in rows[256]
    text = rows[512]["collapsed"]["text"]
    assert "learned, then collapsed to chance" in text and "0.33x its value learned" in text


def test_without_a_chance_band_the_search_keeps_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    study = _search(monkeypatch, None)
    assert not [t for t in accuracy_trials(study, PLAN.id) if t.role == "backoff"]
