"""The operator trace of a training step: which device kernels a step launches, with shapes.

``types`` holds the values (``Operator``, ``OperatorTrace``) that the tracer writes and the
per-operator GPU latency model (``advisor.probes.kernels``) reads.
"""

from advisor.probes.operators.types import KINDS, PHASES, Operator, OperatorTrace

__all__ = ["KINDS", "PHASES", "Operator", "OperatorTrace"]
