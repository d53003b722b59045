"""Trace a workload in the framework it is probed in: one entry point for the callers."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from advisor.probes.operators.types import OperatorTrace


def trace_workload(
    workload: str,
    batch_size: int,
    framework: str = "torch",
    hyperparameters: dict[str, Any] | None = None,
    mode: str = "auto",
) -> OperatorTrace:
    """The operator trace of one training step of ``workload`` (built-in name or
    ``module:function``) at ``batch_size``: PyTorch by its dispatcher (``mode`` auto, meta or
    executed: :func:`~advisor.probes.operators.torch_workload.trace_torch_workload`), Keras
    from its layers (``mode`` is ignored).

    A user's ``module:function`` is traced in the isolated worker (issue #50,
    ``advisor.probes.isolated``): its builder and step run there, so an exit, a crash, a hang
    or a runaway allocation is one ``UserCodeError`` line here. A built-in workload is traced
    in this process: its builder is the advisor's own code (the hyperparameters a space file
    gives it are values, never code), and the first answer of ``suggest`` traces several."""
    if framework not in ("torch", "keras"):
        raise ValueError(f"framework must be torch or keras, but got {framework!r}")
    from advisor.search_spaces.workloads import ModelRef

    if not ModelRef(workload).is_user:
        return trace_here(workload, batch_size, framework, hyperparameters, mode)
    from advisor.probes.isolated import call_isolated, call_isolated_each

    what = f"--model {workload} (its builder and one training step, traced at batch {batch_size})"
    if framework == "torch" and mode != "executed":  # a declared depth: two traces side by side
        from advisor.probes.operators import layer_scaling as depths

        depth = user_declared_depth(workload, hyperparameters)
        if depth is not None:
            small = call_isolated_each(
                [(trace_here, (workload, batch_size, framework, hps, mode), {})
                 for hps in depths.shallow_hyperparameters(hyperparameters)],
                what=what,
            )  # fmt: skip
            carried = depths.carried_declared_trace(small, workload, depth)
            if carried is not None:
                return carried
            hyperparameters = {**(hyperparameters or {}), "layers": depth}  # traced whole
    return call_isolated(
        trace_here, workload, batch_size, framework, hyperparameters, mode, what=what
    )


def trace_here(
    workload: str,
    batch_size: int,
    framework: str = "torch",
    hyperparameters: dict[str, Any] | None = None,
    mode: str = "auto",
) -> OperatorTrace:
    """:func:`trace_workload` in this process (the isolated worker calls this)."""
    if framework == "torch":
        from advisor.probes.operators.torch_workload import trace_torch_workload

        return trace_torch_workload(workload, batch_size, hyperparameters, mode=mode)
    from advisor.probes.operators.keras_trace import trace_keras_workload

    return trace_keras_workload(workload, batch_size, hyperparameters)


def user_declared_depth(workload: str, hyperparameters: dict[str, Any] | None) -> int | None:
    """``declared_depth`` of a user's ``module:function``, asked of the isolated worker (the
    user's module is imported there only, issue #50), once per process for each (workload,
    hyperparameters)."""
    import json

    return _asked_depth(workload, json.dumps(hyperparameters or {}, sort_keys=True, default=str))


@lru_cache(maxsize=64)
def _asked_depth(workload: str, hyperparameters: str) -> int | None:
    import json

    from advisor.probes.isolated import call_isolated
    from advisor.probes.operators.layer_scaling import declared_depth

    what = f"--model {workload} (its module imported, its depth read)"
    depth: int | None = call_isolated(declared_depth, workload, json.loads(hyperparameters),
                                      what=what)  # fmt: skip
    return depth
