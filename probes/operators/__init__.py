"""The operator trace of a training step: which device kernels a step launches, with shapes.

``types`` holds the values (``Operator``, ``OperatorTrace``) that the tracer writes and the
per-operator GPU latency model (``advisor.prediction.kernels``) reads. The public API:

- :func:`trace_workload` (any framework), :func:`trace_torch_workload` (meta device or a real
  CPU step), :func:`trace_step` (a model, loss, optimizer and batch you hold),
  :func:`trace_keras_model` / :func:`trace_keras_workload` (from a Keras model's layers);
- :func:`with_operator_trace`, :func:`operator_trace_of`: the trace kept in a ``ProbeResult``;
- :func:`local_feasibility`: whether a local probe of the traced model fits this machine;
- :func:`top_operators`, :func:`render_shares`, :func:`render_top`: the dominant operators.

Nothing here imports torch or TensorFlow until a function needs it (see docs/operator-trace.md).
"""

from advisor.probes.operators.feasibility import LocalFeasibility, local_feasibility
from advisor.probes.operators.keras_trace import trace_keras_model, trace_keras_workload
from advisor.probes.operators.stored import operator_trace_of, with_operator_trace
from advisor.probes.operators.summary import (
    OperatorShare,
    render_shares,
    render_top,
    shape_text,
    top_operators,
)
from advisor.probes.operators.torch_trace import trace_step
from advisor.probes.operators.torch_workload import trace_torch_workload
from advisor.probes.operators.types import KINDS, PHASES, Operator, OperatorTrace
from advisor.probes.operators.workload import trace_workload

__all__ = [
    "KINDS",
    "PHASES",
    "LocalFeasibility",
    "Operator",
    "OperatorShare",
    "OperatorTrace",
    "local_feasibility",
    "operator_trace_of",
    "render_shares",
    "render_top",
    "shape_text",
    "top_operators",
    "trace_keras_model",
    "trace_keras_workload",
    "trace_step",
    "trace_torch_workload",
    "trace_workload",
    "with_operator_trace",
]
