"""Trace a workload in the framework it is probed in: one entry point for the callers."""

from __future__ import annotations

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
    from its layers (``mode`` is ignored)."""
    if framework == "torch":
        from advisor.probes.operators.torch_workload import trace_torch_workload

        return trace_torch_workload(workload, batch_size, hyperparameters, mode=mode)
    if framework == "keras":
        from advisor.probes.operators.keras_trace import trace_keras_workload

        return trace_keras_workload(workload, batch_size, hyperparameters)
    raise ValueError(f"framework must be torch or keras, but got {framework!r}")
