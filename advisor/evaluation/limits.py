"""A scored run against the limits of a suggestion: the study's objective values, Optuna's
constraint values for the budget and deadline, and whether the run fits them."""

from __future__ import annotations

from typing import Protocol

from advisor.evaluation.contract import Evaluation


class Limits(Protocol):
    """What the limits need of ``SuggestOptions``."""

    @property
    def budget_usd(self) -> float | None: ...

    @property
    def deadline_s(self) -> float | None: ...


def objective_values(objective: str, ev: Evaluation) -> list[float]:
    """The study's objective values of a finished evaluation (runtime, cost or both)."""
    assert ev.runtime is not None and ev.cost is not None
    if objective == "time":
        return [ev.runtime.value]
    if objective == "cost":
        return [ev.cost.value]
    return [ev.runtime.value, ev.cost.value]


def constraints(options: Limits, ev: Evaluation, optimistic: bool = False) -> dict[str, float]:
    """Optuna constraint values (<= 0: met) of the budget and deadline; ``optimistic`` uses
    the interval's low end (could it still fit?)."""
    assert ev.runtime is not None and ev.cost is not None
    out: dict[str, float] = {}
    if options.budget_usd is not None:
        cost = ev.cost.low if optimistic else ev.cost.value
        out["budget"] = cost - options.budget_usd
    if options.deadline_s is not None:
        runtime = ev.runtime.low if optimistic else ev.runtime.value
        out["deadline"] = runtime - options.deadline_s
    if memory_unknown(ev):
        out["memory"] = 1.0  # issue #45: a step whose memory is unknown is never recommended
    return out


def memory_unknown(ev: Evaluation) -> bool:
    """Whether ``ev``'s step memory on its GPUs could not be told (a GPU row's memory with
    ``fits`` None): such a row is shown but never recommended."""
    memory = (ev.estimate or {}).get("memory")
    return isinstance(memory, dict) and "fits" in memory and memory["fits"] is None


def is_feasible(options: Limits, ev: Evaluation, optimistic: bool = False) -> bool:
    """Whether ``ev`` meets the budget and deadline."""
    return all(v <= 0 for v in constraints(options, ev, optimistic).values())
