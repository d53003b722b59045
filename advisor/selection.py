"""Choosing among a study's finished trials: feasible ones, the recommended one, the Pareto
front and its knee. Reads trials through ``advisor.records.TrialRecord``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError
from advisor.planner import dominates
from advisor.records import TrialRecord, is_managed

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

TIE_SHARE = 0.05  # recommended run: objective values this close to the best count as ties


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
    rec = TrialRecord.from_trial(t)
    return rec is None or rec.feasible is not False


def recommended_trial(study: optuna.Study, services: Sequence[str] | None = None) -> FrozenTrial:
    """The trial to train with: fastest (time), cheapest (cost), or for a Pareto study the
    front's knee (``knee``); among machines of ``services`` only, when given (``ec2``,
    ``vertex`` ...). Raises AdvisorError if none is feasible.
    """
    trials = feasible_trials(study)
    if services is not None:
        trials = [t for t in trials if str(t.params.get("machine", "")).split(":")[0] in services]
    if not trials:
        where = f" on {', '.join(services)}" if services is not None else ""
        raise AdvisorError(
            f"Study '{study.study_name}' has no feasible finished trial{where}.",
            "run `advisor suggest` with a larger --budget or --deadline (and a space that "
            "includes that cloud) first, or pass --instance.",
        )
    objective = study.user_attrs.get("objective", "time")
    if objective == "pareto" or len(study.directions) > 1:
        return knee(pareto_front(trials))
    # Values within TIE_SHARE of the best are a tie (well inside the estimates' intervals);
    # the other metric decides among them: the cheapest of the fastest, or vice versa.
    other = "cost_usd" if objective == "time" else "runtime_s"
    best = min(t.values[0] for t in trials)
    ties = [t for t in trials if t.values[0] <= best * (1 + TIE_SHARE)]
    return min(ties, key=lambda t: (_metric(t, other), t.values[0], t.number))


def _metric(t: FrozenTrial, name: str) -> float:
    rec = TrialRecord.from_trial(t)
    iv = None if rec is None else (rec.runtime if name == "runtime_s" else rec.cost)
    return float("inf") if iv is None else iv.value


def knee(front: list[FrozenTrial]) -> FrozenTrial:
    """The front member closest to the ideal point, each objective scaled to [0, 1] over it."""
    lo = [min(t.values[i] for t in front) for i in (0, 1)]
    hi = [max(t.values[i] for t in front) for i in (0, 1)]

    def dist(t: FrozenTrial) -> float:
        return sum(((t.values[i] - lo[i]) / ((hi[i] - lo[i]) or 1.0)) ** 2 for i in (0, 1))

    return min(front, key=lambda t: (dist(t), t.number))


def pareto_front(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """Trials not dominated in (runtime, cost); one per (machine, batch)."""
    points = []
    for t in trials:
        rec = TrialRecord.from_trial(t)
        if rec is not None and rec.runtime is not None and rec.cost is not None:
            points.append(((rec.runtime.value, rec.cost.value), t))
    front = [t for p, t in points if not any(dominates(q, p) for q, _ in points)]
    seen: set[tuple[Any, Any]] = set()
    out = []
    for t in sorted(front, key=lambda t: t.number):
        k = (t.params.get("machine"), t.params.get("batch_size"))
        if k not in seen:
            seen.add(k)
            out.append(t)
    return out
