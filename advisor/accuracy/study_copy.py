"""Short runs moved between the sampler's in-memory copy and the study they are kept in.

The copy holds the plan's few batch sizes, the study the space's (a storage requires one
distribution per parameter name across its trials), and a study with two objectives stores a
finished run's value once per objective.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from advisor.accuracy.plan import TunePlan


def study_batches(study: optuna.Study, plan: TunePlan) -> tuple[int, ...]:
    """The choices of the study's ``batch_size`` distribution (its trials'), else the plan's."""
    from optuna.distributions import CategoricalDistribution

    for t in study.get_trials(deepcopy=False):
        dist = t.distributions.get("batch_size")
        if isinstance(dist, CategoricalDistribution):
            choices = tuple(c for c in dist.choices if isinstance(c, int))
            if len(choices) == len(dist.choices) and set(plan.batch_sizes) <= set(choices):
                return choices
    return plan.study_batch_choices


def with_batches(t: FrozenTrial, choices: tuple[int, ...]) -> FrozenTrial:
    """``t`` with ``batch_size`` drawn from ``choices``: the plan's few batch sizes in the
    in-memory copy the sampler reads, the space's in the study (a storage requires one
    distribution per parameter name across its trials)."""
    import copy

    from optuna.distributions import CategoricalDistribution

    dist = t.distributions.get("batch_size")
    if not isinstance(dist, CategoricalDistribution) or tuple(dist.choices) == tuple(choices):
        return t
    out = copy.deepcopy(t)  # times, attributes and curve kept
    out.distributions = {**t.distributions, "batch_size": CategoricalDistribution(choices)}
    return out


def for_study(t: FrozenTrial, objectives: int) -> FrozenTrial:
    """``t`` with one value per objective of the study it goes to (a finished run's value
    repeated; a pruned or failed run's dropped when the counts differ)."""
    import copy

    import optuna

    if t.values is None or len(t.values) == objectives:
        return t
    out = copy.deepcopy(t)  # times, attributes and curve kept
    done = t.state == optuna.trial.TrialState.COMPLETE
    out.values = [t.values[0]] * objectives if done else None
    return out
