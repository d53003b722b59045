"""The operator trace kept with a probe result (``ProbeResult.operator_trace``), so a
workload's trace at a batch size is taken once and read back, never recomputed. The trace is
parsed once per stored dict (issue #36: a screen read the same trace back 2,470 times, about a
second of CPU before the first answer)."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Any

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


_PARSED: OrderedDict[int, tuple[dict[str, Any], OperatorTrace]] = OrderedDict()
_PARSED_MAX = 64  # the traces of a screen's probes and their stand-ins


def operator_trace_of(probe: ProbeResult) -> OperatorTrace | None:
    """The trace a probe result carries, if any (parsed once per stored dict: a probe's
    ``operator_trace`` is written whole by ``with_operator_trace``, never edited in place)."""
    data = probe.operator_trace
    if not data:
        return None
    hit = _PARSED.get(id(data))
    if hit is not None and hit[0] is data:
        _PARSED.move_to_end(id(data))
        return hit[1]
    trace = OperatorTrace.from_dict(data)
    _PARSED[id(data)] = (data, trace)  # the dict is kept, so its id is not reused
    if len(_PARSED) > _PARSED_MAX:
        _PARSED.popitem(last=False)
    return trace
