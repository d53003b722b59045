"""The recommended, fastest and cheapest trials of a study and its Pareto front, chosen by the
one ranking rule (``advisor.evaluation.ranking``) over the study's finished trials (for
``advisor submit``, which knows only the trials, and the study loop)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from advisor.errors import AdvisorError
from advisor.evaluation.ranking import TIE_SHARE, Point, non_dominated, recommended
from advisor.records import TrialRecord, is_accuracy_trial, is_managed

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

PROBE_CACHE_STUDY = "advisor-probe-cache"  # advisor.evaluation.local's cache: never a study
TIE_BAND_ATTR = "tie_share"  # issue #36: the last report's cost band (25 % when contended)


def feasible_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Finished trials that meet every constraint (budget, deadline)."""
    import optuna

    return [
        t
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if _is_feasible(t)
    ]


def _is_feasible(t: FrozenTrial) -> bool:
    if is_managed(t):  # imported tuning results are measurements, not candidates
        return False
    if is_accuracy_trial(t):  # issue #29: a short accuracy run judges no machine
        return False
    rec = TrialRecord.from_trial(t)
    return rec is None or rec.feasible is not False


def trial_point(t: FrozenTrial) -> Point | None:
    """A finished trial as a Point (None without a run time and cost)."""
    rec = TrialRecord.from_trial(t)
    if rec is None or rec.runtime is None or rec.cost is None:
        return None
    tiebreak = (rec.price_per_hour or 0.0, rec.machine, rec.batch_size)
    return Point(rec.runtime.value, rec.cost.value, rec.feasible is not False, t, tiebreak)


def recommended_trial(study: optuna.Study, services: Sequence[str] | None = None) -> FrozenTrial:
    """The trial to train with, by the ranking rule (``advisor.evaluation.ranking.recommended``); among
    machines of ``services`` only, when given (``ec2``, ``vertex`` ...). Raises AdvisorError
    if none is feasible.
    """
    if study.study_name == PROBE_CACHE_STUDY:
        raise AdvisorError(
            f"'{PROBE_CACHE_STUDY}' is the probe cache, not a study.",
            "pass the study name `advisor suggest` printed (see `advisor dashboard`).",
        )
    trials = feasible_trials(study)
    if services is not None:
        trials = [t for t in trials if str(t.params.get("machine", "")).split(":")[0] in services]
    points = [p for t in trials if (p := trial_point(t)) is not None]
    if not points:
        where = f" on {', '.join(services)}" if services is not None else ""
        raise AdvisorError(
            f"Study '{study.study_name}' has no feasible finished trial{where}.",
            "run `advisor suggest` with a larger --budget or --deadline (and a space that "
            "includes that cloud) first, or pass --instance.",
        )
    objective = study.user_attrs.get("objective", "time")
    if len(study.directions) > 1:
        objective = "pareto"
    # Lowest trial number first, so an exact tie goes to the earlier trial.
    points.sort(key=lambda p: p.ref.number)
    share = study.user_attrs.get(TIE_BAND_ATTR)  # the report's cost band, when it had one
    best = recommended(points, objective, float(share) if share else TIE_SHARE)
    assert best is not None
    trial: FrozenTrial = best.ref
    return trial


def pareto_front(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """Trials not dominated in (runtime, cost), sorted by run time; one per (runtime, cost)."""
    points = [p for t in trials if (p := trial_point(t)) is not None]
    return [p.ref for p in non_dominated([Point(p.runtime, p.cost, True, p.ref) for p in points])]
