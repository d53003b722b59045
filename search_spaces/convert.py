"""Convert a joint space to Optuna distributions and scikit-optimize dimensions.

The machine dimension is one categorical parameter ``machine`` over catalog keys
(``service:instance_type``, ``...:spot`` for spot capacity, ``local:local``); the batch size is
the categorical ``batch_size``; every hyperparameter keeps its own name. Managed-service
parameter specs (SageMaker, Vertex, Azure ML) are built in ``advisor.providers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from advisor.search_spaces.space import (
    CategoricalParam,
    FloatParam,
    IntParam,
    JointSpace,
    Param,
)

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution

MACHINE = "machine"
BATCH = "batch_size"


def param_to_optuna(p: Param) -> BaseDistribution:
    """The Optuna distribution of one hyperparameter."""
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    if isinstance(p, FloatParam):
        return FloatDistribution(p.low, p.high, log=p.log, step=p.step)
    if isinstance(p, IntParam):
        return IntDistribution(p.low, p.high, log=p.log, step=p.step or 1)
    return CategoricalDistribution(p.choices)


def to_optuna(space: JointSpace, machines: Sequence[str]) -> dict[str, BaseDistribution]:
    """All dimensions as Optuna distributions (conditional ones included unconditionally)."""
    from optuna.distributions import CategoricalDistribution

    if not machines:
        raise ValueError("machines must not be empty")
    out: dict[str, BaseDistribution] = {
        MACHINE: CategoricalDistribution(tuple(machines)),
        BATCH: CategoricalDistribution(tuple(space.batch_sizes)),
    }
    for p in space.hyperparameters:
        out[p.name] = param_to_optuna(p)
    return out


def active(p: Param, values: dict[str, Any]) -> bool:
    """Whether ``p`` is active given the values chosen so far (its condition holds)."""
    if p.condition is None:
        return True
    return p.condition.on in values and values[p.condition.on] in p.condition.values


def suggest(
    trial: optuna.trial.Trial, space: JointSpace, machines: Sequence[str]
) -> tuple[str, int, dict[str, Any]]:
    """Sample (machine key, batch size, hyperparameters) define-by-run, honouring conditions.

    Parameters are suggested in the space's order, so a condition may refer to any parameter
    listed before it (a parameter whose condition is not met is not suggested at all).
    """
    if not machines:
        raise ValueError("machines must not be empty")
    machine = str(trial.suggest_categorical(MACHINE, list(machines)))
    batch = int(trial.suggest_categorical(BATCH, list(space.batch_sizes)))
    hps: dict[str, Any] = {}
    for p in _ordered(space.hyperparameters):
        if active(p, hps):
            hps[p.name] = _suggest_one(trial, p)
    return machine, batch, hps


def _suggest_one(trial: optuna.trial.Trial, p: Param) -> Any:
    if isinstance(p, FloatParam):
        return trial.suggest_float(p.name, p.low, p.high, log=p.log, step=p.step)
    if isinstance(p, IntParam):
        return trial.suggest_int(p.name, p.low, p.high, log=p.log, step=p.step or 1)
    return trial.suggest_categorical(p.name, p.choices)


def _ordered(params: Sequence[Param]) -> list[Param]:
    """Parents before the parameters conditioned on them (stable otherwise)."""
    done: list[Param] = []
    names: set[str] = set()
    pending = list(params)
    while pending:
        progressed = False
        for p in list(pending):
            if p.condition is None or p.condition.on in names:
                done.append(p)
                names.add(p.name)
                pending.remove(p)
                progressed = True
        if not progressed:
            raise ValueError(f"conditions form a cycle: {[p.name for p in pending]}")
    return done


def to_skopt(space: JointSpace, machines: Sequence[str]) -> list[Any]:
    """All dimensions as scikit-optimize ``Dimension`` objects (named, in Optuna order).

    scikit-optimize has no conditional parameters: conditional ones are included always and
    simply ignored by the objective when inactive.
    """
    from advisor._lazy import require

    space_mod = require("skopt.space", "skopt", "The skopt sampler")
    dims: list[Any] = [
        space_mod.Categorical(list(machines), name=MACHINE),
        space_mod.Categorical(list(space.batch_sizes), name=BATCH),
    ]
    for p in space.hyperparameters:
        dims.append(param_to_skopt(p))
    return dims


def param_to_skopt(p: Param) -> Any:
    """One hyperparameter as a scikit-optimize dimension."""
    from advisor._lazy import require

    sp = require("skopt.space", "skopt", "The skopt sampler")
    prior = "log-uniform" if getattr(p, "log", False) else "uniform"
    if isinstance(p, FloatParam):
        return sp.Real(p.low, p.high, prior=prior, name=p.name)
    if isinstance(p, IntParam):
        return sp.Integer(p.low, p.high, prior=prior, name=p.name)
    assert isinstance(p, CategoricalParam)
    return sp.Categorical(list(p.choices), name=p.name)
