"""Failed probes as results: which batch sizes failed on this machine, how, and one line each.

A local probe runs once per batch size (``advisor.evaluation.local``); when it fails every
machine at that batch size fails with it, since the catalog machines are modelled from it.
``failed_probes`` finds them (screen and trials), ``first_config`` picks the one (machine,
batch) that records each failure as a FAIL trial, and ``summary`` writes the lines of the
report ("3 of 12 batch sizes ran out of memory on this machine (...)").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from advisor.evaluation.candidates import Candidate
from advisor.evaluation.contract import Scored

# Failures that may not recur (a bug fixed, a busy machine, a signal): reused within one run,
# retried by the next (see ``advisor.evaluation.local``). oom and nan are kept for good.
TRANSIENT_FAILURES = ("error", "timeout", "killed")

VERBS = {
    "oom": "ran out of memory",
    "nan": "diverged (NaN or infinite loss)",
    "timeout": "timed out",
    "killed": "were killed by a signal",
    "error": "raised an error",
}


def _probe_status(ev: Scored) -> tuple[str, str] | None:
    """(status, reason) of a failed local probe behind ``ev``; None when it did not fail."""
    probe: Any = ev.probe
    if probe is None:
        return None
    if isinstance(probe, dict):
        status, reason = str(probe.get("status", "ok")), str(probe.get("error") or "")
    else:
        status, reason = str(probe.status), str(probe.error or "")
    if status == "ok":
        return None
    return status, reason or (ev.error or "no detail")


def failed_probes(evaluations: Iterable[Scored]) -> dict[int, tuple[str, str]]:
    """Batch size -> (status, reason) of each local probe that failed."""
    out: dict[int, tuple[str, str]] = {}
    for ev in evaluations:
        failed = _probe_status(ev)
        if failed is not None:
            out.setdefault(ev.batch_size, failed)
    return out


def first_config(candidates: Sequence[Candidate], batch_size: int) -> tuple[str, int]:
    """The (machine, batch) that records a batch size's failed probe: this machine when it is
    a candidate (it ran the probe), else the first candidate."""
    local = [c for c in candidates if c.local]
    return ((local or list(candidates))[0].key, batch_size)


def summary(
    failures: Mapping[int, tuple[str, str]], batch_sizes: Sequence[int]
) -> list[dict[str, Any]]:
    """One entry per failure status: batch sizes, a reason, and the sentence for the report."""
    by_status: dict[str, list[int]] = {}
    for batch, (status, _) in sorted(failures.items()):
        by_status.setdefault(status, []).append(batch)
    out = []
    for status, batches in by_status.items():
        reason, fix = split_fix(failures[batches[0]][1])
        verb = VERBS.get(status, f"failed ({status})")
        text = (
            f"{len(batches)} of {len(batch_sizes)} batch sizes {verb} on this machine "
            f"({', '.join(map(str, batches))}); so did every machine modelled from them. "
            f"First reason: {reason.rstrip('.')}"
        )
        out.append(
            {"status": status, "batch_sizes": batches, "reason": reason, "fix": fix, "text": text}
        )
    return out


FIX_MARK = " To fix: "  # how an AdvisorError joins its problem and its fix


def split_fix(reason: str) -> tuple[str, str | None]:
    """A failure reason that carries an ``AdvisorError`` (raised in the probe process) as
    (its problem, its fix); other reasons as (reason, None). The report then says the fix
    once, instead of nesting one error's "To fix:" in another's."""
    text = reason.removeprefix("AdvisorError: ")
    if FIX_MARK not in text:
        return reason, None
    problem, _, fix = text.partition(FIX_MARK)
    return problem.strip(), fix.strip().rstrip(".") or None
