"""Take the built-in workloads' traced steps to ship (``advisor.prediction.step.shipped``):
``python -m advisor.shipped_traces`` writes ``search_spaces/workloads/traced_steps.json.gz``
(every built-in workload's: one stamp covers them all). Run it after changing ``probes/`` or
``search_spaces/workloads/`` (or PyTorch): until then the shipped traces are not read, and
``tests/prediction/step/test_shipped.py`` fails."""

from __future__ import annotations

import time
from typing import Any

from advisor.prediction.step import shipped


def taken(workload: str) -> dict[str, Any]:
    """The traces the first answer of ``workload``'s default space takes, by key, taken now
    (every memo emptied first, nothing shipped read)."""
    from advisor.options import SuggestOptions
    from advisor.pipeline import first_answer
    from advisor.prediction.memo import entries, forget_all

    forget_all()
    with shipped.unread():
        first_answer(SuggestOptions(model=workload, budget_usd=5))
    wanted = (f"trace|{workload}|torch|b", f"peak|{workload}|torch|")
    return {
        key: shipped.shipped_notes(value.to_dict())
        for memo in ("traced steps", "plan peak lines")  # traces.py's and memory/plan.py's
        for key, value in entries(memo)
        if isinstance(key, str) and key.startswith(wanted) and key.endswith("|")
    }


def workloads() -> list[str]:
    """The built-in PyTorch workloads that have a default space."""
    from advisor.search_spaces.workloads import get, names

    spaces = shipped.package_dir("advisor.search_spaces.spaces")
    return [n for n in names() if (spaces / f"{n}.yaml").exists() and "torch" in get(n).builders]


def write(say: Any = None) -> dict[str, Any]:
    """Take the traces of every workload of ``workloads()`` and write the shipped file;
    ``say(line)`` hears each workload's count and time."""
    entries: dict[str, Any] = {}
    for name in workloads():
        began = time.monotonic()
        found = taken(name)
        entries.update(found)
        if say is not None:
            say(f"{name}: {len(found)} traces in {time.monotonic() - began:.1f} s")
    return shipped.save(entries)


if __name__ == "__main__":
    written = write(say=print)
    print(f"{len(written['entries'])} traces written to {shipped.path()} ({written['stamp']})")
