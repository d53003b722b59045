"""Short accuracy runs (``suggest --tune``, issue #29) share the study but never the machine
search: its samplers, its trial counts, its feasibility check and recommended_trial leave
them out."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution

from advisor.records import ACCURACY
from advisor.study.samplers import make_sampler
from advisor.study.selection import feasible_trials

DISTS = {
    "machine": CategoricalDistribution(("ec2:a", "ec2:b", "local:local")),
    "batch_size": CategoricalDistribution((256, 512, 1024)),
    "lr": FloatDistribution(0.01, 0.3, log=True),
}


def machine_trials(n: int) -> list[optuna.trial.FrozenTrial]:
    out = []
    for i in range(n):
        params = {
            "machine": DISTS["machine"].choices[i % 3],  # type: ignore[attr-defined]
            "batch_size": (256, 512, 1024)[i % 3],
            "lr": 0.01 * (1.3**i),
        }
        out.append(
            optuna.trial.create_trial(
                params=params, distributions=DISTS, value=100.0 + 7 * ((i * 5) % 11)
            )
        )
    return out


def accuracy_runs(n: int) -> list[optuna.trial.FrozenTrial]:
    dists = {
        "batch_size": CategoricalDistribution((256, 512)),
        "lr": FloatDistribution(0.01, 0.3, log=True),
    }
    return [
        optuna.trial.create_trial(
            params={"batch_size": 256, "lr": 0.29 - 0.01 * i},
            distributions=dists,
            value=0.05 + 0.01 * i,  # validation errors: far below any run time
            user_attrs={ACCURACY: {"plan": "p", "role": "search", "curve": [[1.0, 0.9]]}},
            intermediate_values={1: 0.1},
        )
        for i in range(n)
    ]


@pytest.mark.parametrize(
    "name", ["tpe", pytest.param("gp", marks=pytest.mark.slow), "random", "nsga2"]
)
def test_samplers_propose_the_same_with_or_without_accuracy_runs(name: str) -> None:
    proposals = []
    for extra in (0, 8):
        study = optuna.create_study(sampler=make_sampler(name, seed=3))
        study.add_trials(machine_trials(12) + accuracy_runs(extra))
        proposals.append([study.ask(DISTS).params for _ in range(3)])
    assert proposals[0] == proposals[1]


def test_an_accuracy_run_is_never_a_feasible_machine_trial() -> None:
    study = optuna.create_study()
    study.add_trials(accuracy_runs(3))
    assert feasible_trials(study) == []
