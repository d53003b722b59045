"""The values of an operator trace: one ``Operator`` per distinct device kernel of a training
step (identical calls merged, ``count`` of them), and the ``OperatorTrace`` of a whole step.

The kinds follow what the GPU latency model was measured on (``benchmarks/data/gpu-kernels``,
a copy of NeuSight's measurements: conv, linear, bmm, element-wise, layer norm, softmax) plus
what a step also launches. ``dims`` names each kind's shape fields:

======================  ==================================================================
kind                    dims
======================  ==================================================================
``conv``                B, Cin, Cout, kernel, H, W (input), stride, padding, groups
                        (2-D; a backward convolution is traced as the forward-shaped
                        convolutions it launches: ``conv`` with ``role`` data/weight grad)
``linear``              B, M, N, K: an (M x K) by (K x N) product, B times (B = 1 for mm/addmm)
``bmm``                 B, M, N, K: a batched product
``elementwise``         numel (and ``op``: add, mul, div, pow, relu, gelu, tanh, ...)
``layernorm``           B, H (B rows of H)
``softmax``             B, H
``reduction``           numel (input), out (output numel)
``embedding``           numel (output), rows (table rows)
``optimizer``           numel (parameters updated), tensors (how many), foreach (0 or 1)
``copy``                numel (a data movement kernel: cat, clone, contiguous copy...)
``other``               numel (a kernel the model treats by its memory traffic)
======================  ==================================================================

Views, detaches and other ops that launch no kernel are not recorded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

KINDS = (
    "conv",
    "linear",
    "bmm",
    "elementwise",
    "layernorm",
    "softmax",
    "reduction",
    "embedding",
    "optimizer",
    "copy",
    "other",
)
PHASES = ("forward", "backward", "optimizer")


@dataclass(frozen=True)
class Operator:
    """One device kernel of a training step, ``count`` times per step.

    ``name`` is the framework's op (``aten.addmm``, ``aten.convolution_backward``, a Keras
    layer class); ``op`` refines the kind (``gelu``, ``add``; a conv's ``role``: forward,
    data_grad, weight_grad); ``flops`` and ``bytes`` are per call (bytes: the tensors read and
    written once, the minimum memory traffic).
    """

    kind: str
    phase: str
    name: str
    dims: dict[str, int]
    dtype: str = "float32"
    op: str = ""
    flops: float = 0.0
    bytes: float = 0.0
    count: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, but got {self.kind!r}")
        if self.phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, but got {self.phase!r}")
        if self.count < 1 or self.flops < 0 or self.bytes < 0:
            raise ValueError(
                f"count must be >= 1 and flops, bytes >= 0, but got count={self.count}, "
                f"flops={self.flops}, bytes={self.bytes}"
            )

    @cached_property
    def key(self) -> tuple[Any, ...]:
        """What makes two calls the same kernel (everything but ``count``); made once (the
        kernel model looks each operator up by it at every row)."""
        return (
            self.kind,
            self.phase,
            self.name,
            tuple(sorted(self.dims.items())),
            self.dtype,
            self.op,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "phase": self.phase,
            "name": self.name,
            "dims": dict(self.dims),
            "dtype": self.dtype,
            "op": self.op,
            "flops": self.flops,
            "bytes": self.bytes,
            "count": self.count,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Operator:
        return cls(
            kind=d["kind"],
            phase=d["phase"],
            name=d["name"],
            dims={k: int(v) for k, v in d["dims"].items()},
            dtype=d.get("dtype", "float32"),
            op=d.get("op", ""),
            flops=float(d.get("flops", 0.0)),
            bytes=float(d.get("bytes", 0.0)),
            count=int(d.get("count", 1)),
        )


@dataclass(frozen=True)
class OperatorTrace:
    """The kernels of one training step of ``workload`` at ``batch_size``.

    ``executed`` is False when the step was traced without running it (meta device: shapes
    only, no timing). ``parameters`` counts trainable parameters. ``memory_bytes`` is what
    the step holds, by part (``parameters``, ``gradients``, ``optimizer_state``,
    ``activations``: the tensors autograd saves for the backward pass); empty when unknown.
    ``peak_memory`` is what is live at the step's peak of live tensor bytes, by holder
    (:data:`~advisor.probes.operators.peak_memory.PEAK_KEYS`, summing to the peak); empty
    when not tracked.
    """

    workload: str
    framework: str
    batch_size: int
    operators: tuple[Operator, ...]
    executed: bool = True
    parameters: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    memory_bytes: dict[str, int] = field(default_factory=dict)
    peak_memory: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.batch_size <= 0 or self.parameters < 0:
            raise ValueError(
                f"batch_size must be > 0 and parameters >= 0, but got {self.batch_size}, "
                f"{self.parameters}"
            )
        if any(v < 0 for v in (*self.memory_bytes.values(), *self.peak_memory.values())):
            raise ValueError(
                f"memory_bytes and peak_memory must be >= 0, but got {self.memory_bytes}, "
                f"{self.peak_memory}"
            )

    @cached_property  # read for every row's prediction: computed once per trace
    def launches(self) -> int:
        """Kernel launches per step (every call of every operator)."""
        return sum(o.count for o in self.operators)

    def launches_by_phase(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for o in self.operators:
            out[o.phase] += o.count
        return dict(out)

    @cached_property
    def flops(self) -> float:
        return sum(o.flops * o.count for o in self.operators)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "framework": self.framework,
            "batch_size": self.batch_size,
            "executed": self.executed,
            "parameters": self.parameters,
            "notes": list(self.notes),
            "memory_bytes": dict(self.memory_bytes),
            "peak_memory": dict(self.peak_memory),
            "operators": [o.to_dict() for o in self.operators],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OperatorTrace:
        return cls(
            workload=d["workload"],
            framework=d["framework"],
            batch_size=int(d["batch_size"]),
            operators=tuple(Operator.from_dict(o) for o in d["operators"]),
            executed=bool(d.get("executed", True)),
            parameters=int(d.get("parameters", 0)),
            notes=tuple(d.get("notes", ())),
            memory_bytes={k: int(v) for k, v in d.get("memory_bytes", {}).items()},
            peak_memory={k: int(v) for k, v in d.get("peak_memory", {}).items()},
        )
