"""The study's samplers: Optuna's own, plus a small scikit-optimize adapter.

``make_sampler("tpe" | "gp" | "random" | "nsga2" | "skopt", seed)``. Constraints set with
``trial.set_constraint`` are honoured by TPE, GP and NSGA-II (Optuna 5); the skopt adapter
penalises infeasible trials. optuna-integration's SkoptSampler exists on PyPI but its own docs
advise against it (scikit-optimize is unmaintained), so we keep the ~60-line adapter here.
"""

from __future__ import annotations

import warnings
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial

from advisor.errors import unknown_value_error
from advisor.records import is_accuracy_trial

SAMPLERS = ("tpe", "gp", "random", "nsga2", "skopt")
TPE_STARTUP_TRIALS = 5


def make_sampler(name: str, seed: int | None = None) -> optuna.samplers.BaseSampler:
    """Build a sampler by name (TPE is multivariate and grouped, for conditional spaces) that
    sees the machine search's trials only (``MachineTrialsOnly``)."""
    return MachineTrialsOnly(_sampler(name, seed))


def _sampler(name: str, seed: int | None) -> optuna.samplers.BaseSampler:
    if name == "tpe":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(
                multivariate=True, group=True, seed=seed, n_startup_trials=TPE_STARTUP_TRIALS
            )
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed, warn_independent_sampling=False)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=10)
    if name == "skopt":
        return SkoptSampler(seed=seed)
    raise unknown_value_error("sampler", name, SAMPLERS)


class _Delegating(optuna.samplers.BaseSampler):
    """A sampler that hands independent sampling (on the study as ``_sampled`` shows it),
    the calls that write (``before_trial``, ``after_trial``) and reseeding to
    ``self.sampler``, the sampler it wraps or falls back to."""

    sampler: optuna.samplers.BaseSampler

    def _sampled(self, study: optuna.Study) -> Any:
        """The study as ``self.sampler`` samples from it (here: the study itself)."""
        return study

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        view = self._sampled(study)
        return self.sampler.sample_independent(view, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.sampler.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: Any, values: Any) -> None:
        self.sampler.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.sampler.reseed_rng()


class MachineTrialsOnly(_Delegating):
    """``sampler`` learning from the machine search's trials only.

    The short accuracy trials of ``advisor suggest --tune`` (issue #29) share the study but
    not its objective: their values are validation errors, not run times or costs. Every
    sampling call gets the study with them left out (``_MachineTrials``); the calls that
    write (``before_trial``, ``after_trial``) get the study itself.
    """

    def __init__(self, sampler: optuna.samplers.BaseSampler) -> None:
        self.sampler = sampler

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self.sampler.infer_relative_search_space(self._sampled(study), trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self.sampler.sample_relative(self._sampled(study), trial, search_space)

    def _sampled(self, study: optuna.Study) -> Any:
        return _MachineTrials.of(study)


class _MachineTrials:
    """A study as a sampler reads it, less the short accuracy trials (every other attribute
    is the study's own)."""

    def __init__(self, study: optuna.Study) -> None:
        self._study = study

    @classmethod
    def of(cls, study: optuna.Study) -> Any:
        return study if isinstance(study, cls) else cls(study)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def get_trials(self, deepcopy: bool = True, states: Any = None) -> list[FrozenTrial]:
        trials = self._study.get_trials(deepcopy=deepcopy, states=states)
        return [t for t in trials if not is_accuracy_trial(t)]

    def _get_trials(
        self, deepcopy: bool = True, states: Any = None, use_cache: bool = False
    ) -> list[FrozenTrial]:
        trials = self._study._get_trials(deepcopy=deepcopy, states=states, use_cache=use_cache)
        return [t for t in trials if not is_accuracy_trial(t)]

    @property
    def trials(self) -> list[FrozenTrial]:
        return self.get_trials()


def _infeasible(trial: FrozenTrial) -> bool:
    return any(k.startswith("constraints") and float(v) > 0 for k, v in trial.system_attrs.items())


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


class SkoptSampler(_Delegating):
    """An Optuna sampler backed by ``skopt.Optimizer`` ask/tell (GP, expected improvement).

    The relative search space is the intersection of all finished trials' spaces; parameters
    outside it are sampled at random. The first objective is minimised (maximised ones are
    negated); infeasible trials are told the worst value seen plus a margin.
    """

    def __init__(self, seed: int | None = None, n_startup_trials: int = 3) -> None:
        from advisor._lazy import require

        self._skopt = require("skopt", "skopt", "The skopt sampler")
        self._seed = seed
        self._n_startup = n_startup_trials
        self.sampler = optuna.samplers.RandomSampler(seed=seed)  # outside the relative space
        self._space = optuna.search_space.IntersectionSearchSpace()

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return {n: d for n, d in self._space.calculate(study).items() if not d.single()}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        from optuna.distributions import (
            CategoricalDistribution,
            FloatDistribution,
            IntDistribution,
        )

        if not search_space:
            return {}
        done = [
            t
            for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if all(n in t.params for n in search_space)
        ]
        if len(done) < self._n_startup:
            return {}
        sp = self._skopt.space
        names = list(search_space)
        dims: list[Any] = []
        for n in names:
            d = search_space[n]
            if isinstance(d, CategoricalDistribution):
                dims.append(sp.Categorical(list(d.choices), name=n))
            elif isinstance(d, FloatDistribution):
                dims.append(sp.Real(d.low, d.high, prior="log-uniform" if d.log else "uniform"))
            elif isinstance(d, IntDistribution):
                dims.append(sp.Integer(d.low, d.high, prior="log-uniform" if d.log else "uniform"))
        sign = 1.0 if study.directions[0] == optuna.study.StudyDirection.MINIMIZE else -1.0
        ys = [sign * float(t.values[0]) for t in done]
        worst = max(ys)
        span = (worst - min(ys)) or abs(worst) or 1.0
        xs = [[t.params[n] for n in names] for t in done]
        ys = [worst + span if _infeasible(t) else y for t, y in zip(done, ys, strict=True)]
        seed = None if self._seed is None else self._seed + len(done)
        opt = self._skopt.Optimizer(
            dims, base_estimator="GP", n_initial_points=1, random_state=seed
        )
        opt.tell(xs, ys)
        x = opt.ask()
        return {n: _plain(v) for n, v in zip(names, x, strict=True)}
