"""Issue #45: what the report predicts a row's run will measure, so the exported job can say
whether it matches the advice: the step's peak memory per device (central and upper, from the
memory model's terms the estimate carries: ``DeviceMemory.to_dict()``'s ``step``) and the
steady step time (the predicted phases' ``t2``, with its interval).

Read from the fields the estimate already records; nothing is predicted again here.
"""

from __future__ import annotations

import math
from typing import Any

GIB = float(2**30)


def _positive(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def _gib(value: Any) -> float | None:
    number = _positive(value)
    return None if number is None else round(number / GIB, 3)


def peak_memory(estimate: dict[str, Any]) -> dict[str, Any]:
    """``peak_gib`` (the step's central bytes per device), ``peak_high_gib`` (its upper
    bound), ``have_gib`` (the device's), ``per_device_batch`` and ``device``, from the
    estimate's ``memory`` (absent, or unknown memory: nothing)."""
    memory = estimate.get("memory")
    if not isinstance(memory, dict):
        return {}
    found = memory.get("step")
    step: dict[str, Any] = found if isinstance(found, dict) else {}
    if step.get("known") is False or ("fits" in memory and memory["fits"] is None):
        return {}  # unknown memory: nothing to compare with
    central = _gib(step.get("bytes")) or _positive(memory.get("need_gib"))
    if central is None:
        return {}
    out: dict[str, Any] = {"peak_gib": central}
    high = _gib(step.get("high"))
    if high is not None and high >= central:
        out["peak_high_gib"] = high
    for key in ("have_gib", "per_device_batch", "device"):
        if memory.get(key) is not None:
            out[key] = memory[key]
    return out


def steady_step(estimate: dict[str, Any], phases: Any) -> dict[str, Any]:
    """``step_s`` (the predicted steady step, ``t2``) and its ``step_s_low``/``step_s_high``,
    from the row's phases; without them, the estimate's steady-iteration term over its
    steps (a central value only)."""
    t2 = getattr(phases, "t2", None)
    if t2 is not None and _positive(t2.value) is not None:
        return {"step_s": float(t2.value), "step_s_low": float(t2.low),
                "step_s_high": float(t2.high)}  # fmt: skip
    breakdown = estimate.get("breakdown") or {}
    total = _positive(breakdown.get("steady_iterations"))
    epochs, per_epoch = estimate.get("epochs"), estimate.get("iterations_per_epoch")
    if total is None or not epochs or not per_epoch or epochs * per_epoch < 2:
        return {}
    return {"step_s": total / (epochs * per_epoch - 1)}


def expected(estimate: dict[str, Any] | None, phases: Any = None) -> dict[str, Any] | None:
    """What the row predicts its run measures (peak memory per device, steady step time), or
    None when the estimate holds neither."""
    out = {**peak_memory(estimate or {}), **steady_step(estimate or {}, phases)}
    return out or None


def expect_options(found: dict[str, Any] | None) -> dict[str, float]:
    """``advisor.train``'s ``--expect-*`` values of a row's ``expected`` (only those known)."""
    found = found or {}
    pairs = {"expect_peak_gib": "peak_gib", "expect_peak_high_gib": "peak_high_gib",
             "expect_step_s": "step_s"}  # fmt: skip
    return {opt: float(found[key]) for opt, key in pairs.items() if _positive(found.get(key))}
