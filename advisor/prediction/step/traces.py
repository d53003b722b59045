"""The operator traces a prediction reads: a workload's training step at a per-device batch.

A probe carries its operator trace at its own batch size (``ProbeResult.operator_trace``,
taken once by ``step.ready.traced`` and kept in the probe cache). A machine with ``n`` GPUs
runs the step at ``ceil(B / n)`` per device, and a prediction may ask for another batch than
the probe's: that step is traced on the meta device (shapes only: cheap, no memory), once per
workload, framework, batch and runtime hyperparameters, memoised in this process and, when a
``TraceStore`` is given (the probe cache), kept there too. Where it cannot be traced (a user
module this process cannot import: a shared service predicting an uploaded probe), the
probe's own trace is scaled by the batch ratio and the prediction says so.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from advisor.prediction.memo import Memo
from advisor.prediction.step import shipped
from advisor.probes.operators.stored import operator_trace_of
from advisor.probes.operators.types import OperatorTrace
from advisor.probes.result import ProbeResult

HYPERPARAMETERS_KEY = "runtime_hyperparameters"  # fingerprint: the hps the probe ran with


class TraceStore(Protocol):
    """Where traces are kept between processes (the probe cache implements it)."""

    def get_trace(self, key: str) -> OperatorTrace | None: ...

    def put_trace(self, key: str, trace: OperatorTrace) -> None: ...


@dataclass(frozen=True)
class StepTrace:
    """The trace of one step at ``batch``, how it was obtained, and the factor to apply to
    its device time (1 unless the probe's trace at another batch had to be scaled).
    ``precision``: the plan's (``advisor.prediction.step.plan``); "tf32" lets the kernel model price
    float32 matrix products at the TF32 peak, "bf16"/"fp16" mark a trace rewritten under
    autocast (``advisor.prediction.step.rewrite``)."""

    trace: OperatorTrace
    batch: int
    how: str
    scale: float = 1.0
    precision: str = "fp32"


_MEMO: Memo[OperatorTrace] = Memo("traced steps", bound=256)


def trace_key(workload: str, framework: str, batch: int, hyperparameters: dict[str, Any]) -> str:
    """The key of a traced step (in this process's memo and in a ``TraceStore``)."""
    hp = json.dumps(hyperparameters, sort_keys=True) if hyperparameters else ""
    return f"trace|{workload}|{framework}|b{batch}|{hp}"


def probe_hyperparameters(probe: ProbeResult) -> dict[str, Any]:
    """The runtime hyperparameters a probe ran with (``{}``: the workload's defaults)."""
    value = probe.fingerprint.get(HYPERPARAMETERS_KEY)
    return dict(value) if isinstance(value, dict) else {}


def step_trace(probe: ProbeResult, batch: int, store: TraceStore | None = None) -> StepTrace | None:
    """The operator trace of ``probe``'s step at ``batch`` (per device); None when the probe
    has no trace and the step cannot be traced here."""
    if batch <= 0:
        raise ValueError(f"batch must be > 0, but got {batch}")
    own = operator_trace_of(probe)
    if own is not None and own.batch_size == batch:
        return StepTrace(own, batch, own_how(own))
    hps = probe_hyperparameters(probe)
    key = trace_key(probe.workload, probe.framework, batch, hps)
    found = remembered(key)
    if found is None and store is not None:
        found = store.get_trace(key)
    reason = ""
    if found is None:
        try:
            found = _trace(probe.workload, probe.framework, batch, hps)
        except Exception as exc:  # a module not importable here, an op without a meta kernel
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        else:
            if store is not None:
                store.put_trace(key, found)
    if found is not None:
        _MEMO.put(key, found)
        return StepTrace(found, batch, f"traced on the meta device at batch {batch}")
    if own is None:
        return None
    return StepTrace(
        own,
        batch,
        f"the probe's trace at batch {own.batch_size} scaled to {batch} (not traceable here: "
        f"{reason})",
        scale=batch / own.batch_size,
    )


def trace_ahead(
    workload: str,
    framework: str,
    batches: Iterable[int],
    store: TraceStore | None = None,
    starting: Callable[[int], None] | None = None,
) -> int:
    """Issue #48: the steps of an ``hf:`` model at ``batches`` (its default hyperparameters)
    that neither this process nor ``store`` holds, traced side by side in the isolated
    workers and kept in both, where ``step_trace`` and ``untimed.decide`` read them (a screen
    asks for them one at a time, each a trace in one worker while the other waits). How many
    were traced; after a failure none is kept, and each is traced when asked (which says
    why), but a time-out is raised now rather than waited for again. ``starting(n)``: told
    before ``n`` traces start (never when none does). Other models: nothing (a built-in is
    traced in this process, one at a time)."""
    from advisor.probes.isolated import UserCodeError, call_isolated_each, slots
    from advisor.probes.operators.workload import trace_here

    if framework != "torch" or not str(workload).startswith("hf:") or slots() < 2:
        return 0
    keys = {b: trace_key(workload, framework, b, {}) for b in dict.fromkeys(batches) if b > 0}
    missing = [b for b, key in keys.items() if remembered(key) is None
               and (store is None or store.get_trace(key) is None)]  # fmt: skip
    if len(missing) < 2:
        return 0
    what = f"--model {workload} (its step traced at batches {', '.join(map(str, missing))})"
    if starting is not None:
        starting(len(missing))
    try:
        with user_modules_importable():
            found = call_isolated_each(
                [(trace_here, (workload, b, framework, {}, "meta"), {}) for b in missing],
                what=what,
            )
    except UserCodeError as exc:
        if exc.kind == "timeout":  # each would hang again when asked: said once, now
            raise
        return 0
    except Exception:
        return 0
    for b, trace in zip(missing, found, strict=True):
        _MEMO.put(keys[b], trace)
        if store is not None:
            store.put_trace(keys[b], trace)
    return len(missing)


def own_how(trace: OperatorTrace) -> str:
    """How the probe's own trace was taken, in a few words."""
    return "traced a real CPU step" if trace.executed else "traced on the meta device"


def _trace(workload: str, framework: str, batch: int, hps: dict[str, Any]) -> OperatorTrace:
    from advisor.probes.operators.workload import trace_workload

    mode = "meta" if framework == "torch" else "auto"
    with user_modules_importable():
        return trace_workload(workload, batch, framework, hps, mode=mode)


@contextmanager
def user_modules_importable() -> Iterator[None]:
    """The working directory on ``sys.path`` while a user's ``module:function`` is imported in
    this process, as the probe's child process has it (``python -m`` puts it first): a console
    script's own ``sys.path`` lacks it."""
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def per_device_batch(batch: int, devices: int) -> int:
    """The batch each of ``devices`` data-parallel replicas runs."""
    return math.ceil(batch / max(1, devices))


def remembered(key: str) -> OperatorTrace | None:
    """A trace taken earlier in this process under ``key``, or shipped (a built-in workload's,
    ``shipped``)."""
    found = _MEMO.get(key)
    if found is None:
        found = shipped.trace(key)
        if found is not None:
            _MEMO.put(key, found)
    return found


def remember(key: str, trace: OperatorTrace) -> None:
    """Keep ``trace`` under ``key`` for this process."""
    _MEMO.put(key, trace)
