"""Conversions of a joint space to Optuna distributions and scikit-optimize dimensions."""

from __future__ import annotations

import optuna
from advisor.search_spaces.convert import suggest, to_optuna, to_skopt
from advisor.search_spaces.loader import load_space
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

TEXT = """
workload: mymodels:build
batch_sizes: [256, 512]
hyperparameters:
  optimizer: {type: categorical, choices: [sgd, adam]}
  beta1: {type: float, low: 0.8, high: 0.99, condition: {on: optimizer, values: [adam]}}
  lr: {type: float, low: 0.001, high: 0.1, log: true}
  width: {type: int, low: 16, high: 64}
"""
MACHINES = ["ec2:p3.2xlarge", "ec2:p3.2xlarge:spot", "local:local"]


def test_to_optuna_maps_every_dimension() -> None:
    dists = to_optuna(load_space(TEXT), MACHINES)
    assert dists["machine"] == CategoricalDistribution(tuple(MACHINES))
    assert dists["batch_size"] == CategoricalDistribution((256, 512))
    assert dists["lr"] == FloatDistribution(0.001, 0.1, log=True)
    assert dists["width"] == IntDistribution(16, 64)
    assert dists["optimizer"] == CategoricalDistribution(("sgd", "adam"))


def test_suggest_honours_conditions() -> None:
    space = load_space(TEXT)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen = set()
    for _ in range(30):
        trial = study.ask()
        machine, batch, hps = suggest(trial, space, MACHINES)
        assert machine in MACHINES and batch in (256, 512)
        assert ("beta1" in hps) == (hps["optimizer"] == "adam")
        assert 0.001 <= hps["lr"] <= 0.1
        seen.add(hps["optimizer"])
        study.tell(trial, 1.0)
    assert seen == {"sgd", "adam"}


def test_to_skopt_dimensions() -> None:
    from skopt.space import Categorical, Integer, Real

    dims = {d.name: d for d in to_skopt(load_space(TEXT), MACHINES)}
    assert isinstance(dims["machine"], Categorical)
    assert list(dims["batch_size"].categories) == [256, 512]
    assert isinstance(dims["lr"], Real) and dims["lr"].prior == "log-uniform"
    assert isinstance(dims["width"], Integer) and (dims["width"].low, dims["width"].high) == (
        16,
        64,
    )
