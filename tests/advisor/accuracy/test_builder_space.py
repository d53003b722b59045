"""A user model's default ``--tune`` space from its builder's keyword arguments (issue #36),
through the tune step and the report, with the fake trainer (milliseconds)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import optuna
import pytest
from advisor.search_spaces.space import FloatParam, JointSpace
from short_runs import Clock, fake_trainer

from advisor.accuracy.builder_space import builder_space
from advisor.accuracy.plan import SampleCost
from advisor.accuracy.step import tune_step
from advisor.errors import AdvisorError
from advisor.report.hyperparameters import attach, lines

USER = "user_models:build"  # build(batch_size=32, seed=0, lr=0.1, **_)
COST = SampleCost(train_s=1 / 2000, val_s=1 / 6000, basis="test")


def test_positive_float_defaults_are_searched_on_a_log_range_the_rest_left_alone() -> None:
    found = builder_space(
        {"batch_size": 32, "seed": 0, "lr": 0.01, "momentum": 0.9, "weight_decay": 5.0,
         "width": 128, "optimizer": "sgd", "nesterov": False, "dropout": 0.0}
    )  # fmt: skip
    got = {p.name: (p.low, p.high, p.log) for p in found.params if isinstance(p, FloatParam)}
    assert got["lr"] == pytest.approx((0.001, 0.1, True))
    assert got["momentum"] == pytest.approx((0.09, 0.99, True))  # a fraction stays below 1
    assert got["weight_decay"] == pytest.approx((0.5, 50.0, True))
    assert set(got) == {"lr", "momentum", "weight_decay"}
    assert found.left_alone == ("width=128", "optimizer='sgd'", "nesterov=False", "dropout=0.0")
    assert found.to_dict()["searched"]["lr"] == "0.001..0.1 log"


def _outcome(space: JointSpace, model: str = USER) -> Any:
    study = optuna.create_study()
    workload = SimpleNamespace(name=model, framework="torch", n_train=512, n_val=128)
    options = SimpleNamespace(seed=0, threads=1)
    return SimpleNamespace(study=study, workload=workload, options=options, space=space, screen={})


def _tune(outcome: Any) -> dict[str, Any]:
    clock = Clock()
    rec = {"machine": "local:this", "batch_size": 32, "hyperparameters": {}, "epochs": 2}
    return tune_step(
        outcome, rec, [], 120.0, train=fake_trainer(clock, 1.0), cost=COST, clock=clock
    )


@pytest.mark.slow  # imports the user module, so torch
def test_a_user_model_without_a_space_tunes_its_builder_defaults_and_says_so() -> None:
    outcome = _outcome(JointSpace(workload=USER, batch_sizes=(16, 32, 64)))
    done = _tune(outcome)  # before issue #36: AdvisorError "the space has none"
    assert done["space"]["searched"] == {"lr": "0.01..0.91 log"}
    report: dict[str, Any] = {"recommended": {"batch_size": 32, "hyperparameters": {}}}
    attach(report, outcome.study)
    section = report["hyperparameters"]
    assert section["space"]["searched"] == {"lr": "0.01..0.91 log"}
    assert section["runs"]["runs"] > 0
    assert any("searched (from the builder's defaults" in line for line in lines(report))
    lrs = [t.params["lr"] for t in outcome.study.trials if "lr" in t.params]
    assert lrs and all(0.01 <= lr <= 0.91 for lr in lrs) and len(set(lrs)) > 1


def test_a_declared_space_overrides_the_builder_defaults() -> None:
    declared = JointSpace(
        workload=USER,
        batch_sizes=(16, 32, 64),
        hyperparameters=(FloatParam("lr", 0.2, 0.4, log=True),),
    )
    outcome = _outcome(declared)
    done = _tune(outcome)
    assert done["space"] is None
    lrs = [t.params["lr"] for t in outcome.study.trials if "lr" in t.params]
    assert lrs and all(0.2 <= lr <= 0.4 + 1e-12 for lr in lrs)


def test_a_builtin_model_without_hyperparameters_still_says_the_space_has_none() -> None:
    outcome = _outcome(JointSpace(workload="fcn", batch_sizes=(256, 512)), model="fcn")
    with pytest.raises(AdvisorError, match="the space has none"):
        _tune(outcome)
    assert math.isfinite(COST.train_s)
