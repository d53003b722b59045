"""Checks of a space against what the catalog sells (the space file alone cannot know it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from advisor.errors import AdvisorError, close_matches


def check_instance_types(
    requested: Iterable[str],
    known: Iterable[Any],
    spellings: Callable[[Iterable[str]], Iterable[str]] | None = None,
) -> None:
    """Every name in a space's ``machines.instance_types`` must be a catalog instance type
    (``p3.2xlarge``), key (``ec2:p3.2xlarge``) or, with ``spellings`` (the catalog's
    ``matching_keys``), a provider's own name for one (``Standard_NC6s_v3``); an unknown one
    is refused, not dropped.

    ``known`` are the back end's instances (``InstanceType``-like: ``instance_type``, ``key``).
    """
    wanted = list(requested)
    if not wanted:
        return
    names: set[str] = set()
    for inst in known:
        names.update((inst.instance_type, inst.key))
    expand = spellings or (lambda ws: tuple(ws))
    unknown = [w for w in wanted if not set(expand([w])) & names]
    if not unknown:
        return
    hints = []
    for name in unknown:
        near = close_matches(name, names)
        hints.append(f"'{name}'" + (f" (did you mean {', '.join(near)}?)" if near else ""))
    raise AdvisorError(
        f"The space's machines.instance_types names {len(unknown)} machine type(s) the catalog "
        f"does not have: {', '.join(hints)}.",
        "use names from `advisor catalog --service all` (type or service:type), or pick "
        "another --snapshot.",
    )
