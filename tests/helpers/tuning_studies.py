"""Fixtures for the managed tuning tests: specs and small advisor studies in the agreed format
(``make_spec``, ``storage``, ``study_factory``, registered in ``tests/conftest.py``; ``make_study``
imported by name)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from advisor.providers.tuning import TuningSpec
from advisor.search_spaces.space import (
    CategoricalParam,
    FloatParam,
    IntParam,
    JointSpace,
    space_to_dict,
)

PARAMS = (
    FloatParam("lr", 0.01, 0.3, log=True),
    FloatParam("momentum", 0.5, 0.99),
    IntParam("width", 8, 200),
    CategoricalParam("optimizer", ("sgd", "adam")),
)


@pytest.fixture
def make_spec() -> Callable[..., TuningSpec]:
    """A spec with all parameter kinds; keyword arguments override fields."""

    def make(**overrides: Any) -> TuningSpec:
        fields: dict[str, Any] = {
            "job_name": "advisor-fcn-test-1",
            "workload": "fcn",
            "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/advisor:1",
            "instance_type": "ml.p3.2xlarge",
            "hyperparameters": PARAMS,
            "fixed": {"model": "fcn", "batch_size": 512, "epochs": 14},
            "accelerator": "V100",
            "accelerator_count": 1,
            "max_trials": 12,
            "parallel_trials": 3,
            "output": "s3://bucket/advisor",
        }
        fields.update(overrides)
        return TuningSpec(**fields)

    return make


def make_study(
    storage: str,
    name: str = "fcn-study",
    machine: str = "sagemaker:ml.p3.2xlarge",
    params: tuple[Any, ...] = PARAMS,
    other_machines: tuple[str, ...] = (),
    training_plan: dict[str, Any] | None = None,
) -> Any:
    """An advisor study as `advisor suggest` leaves it: one recommended, finished trial
    (``training_plan``: the plan its estimate was made under, issue #35)."""
    import optuna
    from advisor.search_spaces.convert import param_to_optuna
    from optuna.distributions import CategoricalDistribution

    from advisor.intervals import Interval
    from advisor.records import TrialRecord

    space = JointSpace(workload="fcn", hyperparameters=params)
    study = optuna.create_study(study_name=name, storage=storage, directions=["minimize"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study.set_metric_names(["runtime_s"])
    for key, value in {
        "workload": "fcn",
        "framework": "torch",
        "space": space_to_dict(space),
        "catalog_snapshot": "2026-11-01",
        "objective": "time",
    }.items():
        study.set_user_attr(key, value)
    dists = {
        "machine": CategoricalDistribution((machine, *other_machines, "local:local")),
        "batch_size": CategoricalDistribution((256, 512, 1024, 2048)),
        **{p.name: param_to_optuna(p) for p in params},
    }
    values = {"lr": 0.1, "momentum": 0.9, "width": 32, "optimizer": "sgd", "dropout": 0.2}
    trial = optuna.trial.create_trial(
        params={"machine": machine, "batch_size": 512, **{p.name: values[p.name] for p in params}},
        distributions=dists,
        values=[600.0],
        user_attrs=TrialRecord(
            machine=machine,
            batch_size=512,
            source="modelled",
            price_per_hour=3.825,
            spot=machine.endswith(":spot"),
            epochs=14,
            runtime=Interval(600.0, 550.0, 650.0),
            cost=Interval(0.6375, 0.584, 0.691),  # 600 s at 3.825 USD/h
            estimate={
                "epochs": 14,
                "runtime": {"value": 600.0, "low": 550.0, "high": 650.0},
                **({"training_plan": training_plan} if training_plan else {}),
            },
            feasible=True,
        ).to_attrs(),
    )
    study.add_trial(trial)
    return study


@pytest.fixture
def storage(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'studies.db'}"


@pytest.fixture
def study_factory() -> Callable[..., Any]:
    return make_study
