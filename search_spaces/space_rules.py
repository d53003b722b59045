"""Rules a space file must keep beyond its format, checked by the loader with the file, line
and key of the offending value (``advisor.search_spaces.loader``): conditions without cycles,
hyperparameters the workload's builder takes (names and values), and at most
``MAX_RUNTIME_VALUES`` values of a hyperparameter that changes the run time."""

from __future__ import annotations

from typing import Protocol

import yaml
from advisor.search_spaces.space import CategoricalParam, Param

from advisor.errors import AdvisorError, close_matches

MAX_RUNTIME_VALUES = 64  # values of a hyperparameter that changes the run time (each a probe)


class Reader(Protocol):
    """What the rules need from the loader's reader: an error at a node."""

    def error(self, node: yaml.Node, key: str, message: str, fix: str = ...) -> AdvisorError: ...


def check_conditions(r: Reader, params: list[Param], entries: dict) -> None:
    """No parameter may be conditioned on itself or, through others, on itself (a cycle)."""
    on = {p.name: p.condition.on for p in params if p.condition is not None}
    for start in on:
        seen = [start]
        while seen[-1] in on:
            nxt = on[seen[-1]]
            if nxt in seen:
                loop = " -> ".join([*seen[seen.index(nxt) :], nxt])
                what = "is on the parameter itself" if len(seen) == 1 else f"forms a cycle ({loop})"
                raise r.error(
                    entries[start][1],
                    f"hyperparameters.{start}.condition.on",
                    f"the condition {what}",
                    "condition each parameter on another one that is always active.",
                )
            seen.append(nxt)


def check_names(r: Reader, workload: str, params: list[Param], entries: dict) -> None:
    """Issue #28: every hyperparameter must be one the built-in workload's builder takes
    (its signature), else it would be searched and probed while changing nothing."""
    from advisor.search_spaces.workloads import ModelRef, names
    from advisor.search_spaces.workloads.hyperparameters import workload_params

    if ModelRef(workload).is_user or workload not in names():
        return  # a user builder is checked where it is imported (advisor.options)
    known = workload_params(workload)
    for p in params:
        if p.name not in known.params:
            near = close_matches(p.name, known.params)
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            raise r.error(
                entries[p.name][1],
                f"hyperparameters.{p.name}",
                f"workload '{workload}' does not take {p.name}{hint}, so it would be searched "
                "and probed while changing nothing",
                f"use its hyperparameters: {', '.join(sorted(known.params))} (`advisor "
                f"workloads {workload}` lists them).",
            )


def check_accepted(r: Reader, workload: str, params: list[Param], entries: dict) -> None:
    """Ranges and choices must be values the built-in workload's builder takes."""
    from advisor.search_spaces.workloads.accepted import refused

    check_names(r, workload, params, entries)

    for p in params:
        values = p.choices if isinstance(p, CategoricalParam) else (p.low, p.high)
        why = refused(workload, p.name, tuple(values))
        if why:
            raise r.error(
                entries[p.name][1],
                f"hyperparameters.{p.name}",
                why,
                "narrow the range (or choices) to what the workload takes.",
            )


def check_runtime_values(
    r: Reader,
    node: yaml.Node,
    key: str,
    low: float,
    high: float,
    step: float | None,
    integer: bool,
) -> None:
    """A hyperparameter that changes the run time is probed once per value it takes: at
    most ``MAX_RUNTIME_VALUES`` values (an integer range, or a stepped one)."""
    if integer or step is not None:
        values = int((high - low) / (step or 1)) + 1
        if values <= MAX_RUNTIME_VALUES:
            return
        what = f"takes {values:,} values"
    else:
        what = "is continuous"
    raise r.error(
        node,
        key,
        f"changes the run time (affects_runtime) and {what}, but each value is probed on this "
        f"machine: at most {MAX_RUNTIME_VALUES} values",
        "narrow the range, add a step (step: 16), or list the values (type: categorical).",
    )
