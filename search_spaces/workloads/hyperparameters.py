"""The hyperparameters a workload's builder takes, read from its signature.

A built-in builder is called as ``builder(batch_size=..., n_train=..., n_val=..., seed=...,
**hyperparameters)`` and swallows names it does not know (``**_ignored``), so a space naming
``width`` for ``fcn`` (which has no width) or a typo such as ``lrr`` would be searched,
"advised" and probed while changing nothing. The names a builder takes are its named
parameters (the sizes and the seed aside); a space naming any other is refused, with the
known names in the error. A user builder that takes ``**kwargs`` may use any name, so only
its named parameters are listed and nothing is refused.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from advisor.errors import AdvisorError, close_matches

# What every builder receives from the probe: not hyperparameters a space may search.
STRUCTURAL = frozenset({"batch_size", "n_train", "n_val", "seed"})


@dataclass(frozen=True)
class BuilderParams:
    """A builder's hyperparameters (name -> default; ``None`` when it has no default) and
    whether it also takes names it does not list (``**kwargs`` that it uses)."""

    params: dict[str, Any]
    open_ended: bool


def builder_params(builder: Callable[..., Any], swallows: bool) -> BuilderParams:
    """The hyperparameters of ``builder`` from its signature; ``swallows``: its ``**kwargs``
    only discard unknown names (the built-ins' ``**_ignored``), so they are not open-ended."""
    params: dict[str, Any] = {}
    open_ended = False
    for p in inspect.signature(builder).parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            open_ended = not swallows
        elif p.kind is not inspect.Parameter.VAR_POSITIONAL and p.name not in STRUCTURAL:
            params[p.name] = None if p.default is inspect.Parameter.empty else p.default
    return BuilderParams(params, open_ended)


def workload_params(name: str, framework: str | None = None) -> BuilderParams:
    """A built-in workload's hyperparameters: its ``framework`` builder's, or (None) those
    every framework's builder takes with the torch defaults first."""
    from advisor.search_spaces.workloads import get

    wl = get(name)
    frameworks = [framework] if framework else list(wl.builders)
    merged: dict[str, Any] = {}
    for fw in frameworks:
        for key, value in builder_params(wl.builder(fw), swallows=True).params.items():
            merged.setdefault(key, value)
    return BuilderParams(merged, False)


def user_params(path: str) -> BuilderParams:
    """A user builder's (``module:function``) hyperparameters; imports its module."""
    from advisor.search_spaces.workloads import load_callable

    return builder_params(load_callable(path), swallows=False)


def check_names(
    workload: str, names: Iterable[str], known: BuilderParams, where: str = "the space"
) -> None:
    """Raise AdvisorError when ``names`` holds one ``known`` does not take (unless the
    builder is open-ended): the error names the known hyperparameters."""
    if known.open_ended:
        return
    unknown = [n for n in names if n not in known.params]
    if not unknown:
        return
    first = unknown[0]
    near = close_matches(first, known.params)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    listed = ", ".join(sorted(known.params)) or "none"
    raise AdvisorError(
        f"{where} names {', '.join(repr(n) for n in unknown)}, which workload '{workload}' "
        f"does not take{hint}: it would be searched and probed while changing nothing.",
        f"use its hyperparameters ({listed}; `advisor workloads {workload}` lists them).",
    )
