"""The operator trace kept with a probe result (``ProbeResult.operator_trace``), so a
workload's trace at a batch size is taken once and read back, never recomputed."""

from __future__ import annotations

import dataclasses

from advisor.probes.operators.types import OperatorTrace
from advisor.probes.result import ProbeResult


def with_operator_trace(probe: ProbeResult, trace: OperatorTrace) -> ProbeResult:
    """``probe`` carrying ``trace`` (of the same workload and batch size)."""
    if (trace.workload, trace.batch_size) != (probe.workload, probe.batch_size):
        raise ValueError(
            f"the trace is of {trace.workload} at batch {trace.batch_size}, the probe of "
            f"{probe.workload} at batch {probe.batch_size}"
        )
    return dataclasses.replace(probe, operator_trace=trace.to_dict())


def operator_trace_of(probe: ProbeResult) -> OperatorTrace | None:
    """The trace a probe result carries, if any."""
    data = probe.operator_trace
    return OperatorTrace.from_dict(data) if data else None
