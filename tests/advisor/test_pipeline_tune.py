"""``advisor.suggest(..., tune_s=...)``: short accuracy runs after the machine search (issue
#29), on the replay back end with a fake trainer: the recommendation gains hyperparameters with
their evidence, and the machine search's answer does not move."""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import pytest
from advisor.search_spaces.loader import default_space
from replay_tables import small_table
from short_runs import Clock, fake_trainer

from advisor.accuracy import step
from advisor.accuracy.plan import SampleCost
from advisor.evaluation.replay import ReplayBackend
from advisor.pipeline import suggest
from advisor.records import is_accuracy_trial
from advisor.study.selection import recommended_trial

SPACE = replace(default_space("fcn"), batch_sizes=(256, 512))
COST = SampleCost(train_s=1 / 2000, val_s=1 / 6000, basis="test")


@pytest.fixture
def fake_training(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    trainer = fake_trainer(clock, 1.0)
    tuned = functools.partial(step.tune_step, train=trainer, cost=COST, clock=clock)
    monkeypatch.setattr(step, "tune_step", tuned)
    return clock


def run(tmp_path: Path, **kw: Any) -> dict[str, Any]:
    tmp_path.mkdir(exist_ok=True)
    url = f"sqlite:///{tmp_path / 's.db'}"
    return suggest(
        model="fcn", space=SPACE, storage=url, backend=ReplayBackend(small_table()), **kw
    )


def machine_view(report: dict[str, Any]) -> list[Any]:
    return [
        (r["machine"], r["batch_size"], r["runtime_s"], r["cost_usd"]) for r in report["ranking"]
    ]


@pytest.mark.slow
@pytest.mark.parametrize("limits", [{"budget_usd": 5.0}, {}])  # time; pareto
def test_tune_adds_hyperparameters_and_leaves_the_machine_answer(
    tmp_path: Path, fake_training: Clock, limits: dict[str, Any]
) -> None:
    plain = run(tmp_path / "a", **limits)
    tuned = run(tmp_path / "b", tune_s=600.0, **limits)
    assert machine_view(tuned) == machine_view(plain)
    assert tuned["trials"] == plain["trials"]  # the counts are the machine search's
    rec = tuned["recommended"]
    assert (rec["machine"], rec["batch_size"]) == (plain["recommended"]["machine"], 512)
    assert rec["hyperparameters"]["lr"] > 0 and "momentum" in rec["hyperparameters"]
    found = rec["hyperparameter_evidence"]
    assert found["metric"] == "val_accuracy" and found["batch_size"] == 512
    assert found["out_of_runs"] > found["runs"]["finished"] > 0 and found["runs"]["pruned"] > 0
    assert found["at_epochs"] > 0 and "do not promise" in found["limits"]
    section = tuned["hyperparameters"]
    assert section["plan"]["batch_sizes"] == [256, 512] and section["lr_rule"]["by_batch"]
    assert section["narrowed_ranges"]
    assert "hyperparameters" not in plain and plain["recommended"]["hyperparameters"] == {}


@pytest.mark.slow
def test_the_same_command_again_gives_the_same_answer(tmp_path: Path, fake_training: Clock) -> None:
    first = run(tmp_path, budget_usd=5.0, tune_s=600.0)
    study = optuna.load_study(study_name=first["study"], storage=f"sqlite:///{tmp_path / 's.db'}")
    n = len(study.trials)
    second = run(tmp_path, budget_usd=5.0, tune_s=600.0)
    assert len(study.trials) == n and second["resumed"]
    assert second["recommended"] == first["recommended"]
    assert second["hyperparameters"]["this_run"]["new_runs"] == 0
    # a run without --tune still reports what the study's short runs found
    third = run(tmp_path, budget_usd=5.0)
    assert third["recommended"]["hyperparameters"] == first["recommended"]["hyperparameters"]
    best = recommended_trial(study)
    assert not is_accuracy_trial(best) and best.params["machine"] == first["recommended"]["machine"]
    pruned = [t for t in study.trials if is_accuracy_trial(t) and t.state.name == "PRUNED"]
    assert pruned and all(t.intermediate_values for t in pruned)


@pytest.mark.slow
def test_values_that_do_not_survive_their_seed_repeats_are_not_recommended(
    tmp_path: Path, fake_training: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue #36: every seed repeat of the best collapses to chance (2 classes)
    import short_runs

    learns = short_runs.accuracy

    def lucky(hps: dict[str, Any], batch: int, epochs: float, seed: int = 0, **kw: Any) -> float:
        return 0.5 if seed > 0 else learns(hps, batch, epochs, seed, **kw)

    monkeypatch.setattr(short_runs, "accuracy", lucky)
    report = run(tmp_path, budget_usd=5.0, tune_s=600.0)
    rec = report["recommended"]
    found = rec["hyperparameter_evidence"]
    assert found["seeds"]["count"] > 1  # the best was repeated
    assert "did not survive its own seed repeats" in found["not_repeated"]
    assert "lr" not in rec["hyperparameters"]  # the recipe's stay
