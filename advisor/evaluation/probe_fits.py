"""Issue #50: a local probe's batch checked against this machine's memory before it allocates.

``advisor probe --batch-size 100000000`` grew to 15.7 GB before anything checked it. The step
is traced on the meta device first (shapes only: no memory; ``evaluation.untimed.decide``,
which ``advisor predict`` and ``suggest`` already ask) and its bytes on this CPU from the one
memory model (``prediction.memory.step_memory(trace, device="cpu")``) are held against the
memory available now (``probes.operators.feasibility``: at most ``MEMORY_FRACTION`` of it).
A step that does not fit is refused in one line naming the largest batch that does: memory
grows about linearly with the batch, so the batch is read off the traces at 1 and at the
batch asked, then confirmed by tracing it (and moved down where the line was optimistic).
"""

from __future__ import annotations

import math
from typing import Any

from advisor.errors import AdvisorError

_CONFIRM_TRIES = 4


def check_probe_fits(model: str, batch_size: int, framework: str = "torch") -> Any:
    """Raise a one-line ``AdvisorError`` when a probe of ``model`` at ``batch_size`` cannot
    hold its step in this machine's memory; else return the step's trace (None when it could
    not be traced here: the probe runs, as before)."""
    from advisor.evaluation.untimed import decide

    decision = decide(model, batch_size, framework, max_step_s=math.inf)  # memory alone
    if decision is None:
        return None
    if decision.feasible:
        return decision.trace
    best = largest_fitting_batch(model, batch_size, framework)
    fix = (
        f"use --batch-size {best} or less (the largest that fits here)"
        if best
        else "even batch 1 does not fit here"
    )
    raise AdvisorError(
        f"--batch-size {batch_size} does not fit this machine's memory for {model}: "
        f"{decision.reason}.",
        f"{fix}, or probe on a larger machine with --on MACHINE.",
    )


def largest_fitting_batch(model: str, batch_size: int, framework: str = "torch") -> int | None:
    """The largest batch below ``batch_size`` whose step fits here (see the module); None
    when not even batch 1 does or the steps cannot be traced."""
    at_one = _bytes(model, 1, framework)
    at_b = _bytes(model, batch_size, framework)
    if at_one is None or at_b is None:
        return None
    have = _capacity()
    if at_one > have:
        return None
    per_sample = max((at_b - at_one) / max(batch_size - 1, 1), 1.0)
    best = min(batch_size - 1, 1 + int((have - at_one) / per_sample))
    for _ in range(_CONFIRM_TRIES):
        need = _bytes(model, best, framework)
        if need is None or need <= have or best <= 1:
            return best
        best = max(1, int(best * have / need * 0.99))
    return best


def _capacity() -> float:
    from advisor.probes.operators.feasibility import MEMORY_FRACTION, available_memory_bytes

    return MEMORY_FRACTION * available_memory_bytes()


def _bytes(model: str, batch_size: int, framework: str) -> float | None:
    """The step's bytes on this CPU at ``batch_size`` (None: not traceable or not known)."""
    from advisor.evaluation.untimed import decide, host_memory_bytes

    decision = decide(model, batch_size, framework, max_step_s=math.inf)
    if decision is None or not decision.trace.memory_bytes:
        return None
    return host_memory_bytes(decision.trace)
