"""Issue #45: the run says whether it matches the advice.

An exported or submitted job carries what the report predicted for its row
(``--expect-peak-gib``, ``--expect-peak-high-gib``: the step's peak memory per device, central
and upper; ``--expect-step-s``: the steady step time; all optional). ``advisor.train`` prints at
its start the plan it runs and those predictions, and at its end what it measured beside them,
as one line and as metric lines (``peak_memory_gib``, ``steady_step_s``):

- peak memory: on CUDA ``torch.cuda.max_memory_allocated()`` (the allocator's peak, what the
  memory model predicts; rank 0's device); on the CPU PyTorch keeps no allocator peak, so the
  process's peak resident set (``getrusage``'s ``ru_maxrss``) is given and labelled as such:
  it also holds the interpreter, the libraries and the data, and is no measure of the step;
- the steady step: the median of the run's training steps from the second on
  (``advisor.probes.torch_loop.train``'s ``steady_iteration_s``, timed as the probes time them).
"""

from __future__ import annotations

import math
import resource
import sys
from dataclasses import dataclass
from typing import Any

GIB = float(2**30)
PEAK_METRIC = "peak_memory_gib"
STEP_METRIC = "steady_step_s"
RSS_LABEL = (
    "process peak RSS on the CPU, which holds the interpreter, libraries and data too: not "
    "the step's bytes"
)
CUDA_LABEL = "torch.cuda.max_memory_allocated"


@dataclass(frozen=True)
class Expected:
    """What the report predicted for the run (None: not given)."""

    peak_gib: float | None = None
    peak_high_gib: float | None = None
    step_s: float | None = None

    @classmethod
    def from_args(cls, args: Any) -> Expected:
        return cls(
            _positive(getattr(args, "expect_peak_gib", None)),
            _positive(getattr(args, "expect_peak_high_gib", None)),
            _positive(getattr(args, "expect_step_s", None)),
        )

    def peak_words(self) -> str:
        if self.peak_gib is None:
            return ""
        high = f" (up to {_g(self.peak_high_gib)})" if self.peak_high_gib else ""
        return f"{_g(self.peak_gib)} GiB{high} per device"

    def words(self) -> str:
        """``peak memory 110.7 GiB (up to 125.1) per device, steady step 1.23 s``."""
        parts = []
        if self.peak_gib is not None:
            parts.append(f"peak memory {self.peak_words()}")
        if self.step_s is not None:
            parts.append(f"steady step {_g(self.step_s)} s")
        return ", ".join(parts)


def _positive(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def _g(value: float | None) -> str:
    return "?" if value is None else f"{value:.4g}"


def start_line(plan_words: str, expected: Expected) -> str:
    """The first words after the device line: the plan run and what the report predicted."""
    said = expected.words()
    predicted = f"; the report predicted {said}" if said else "; no prediction given (--expect-*)"
    return f"advisor-train: plan {plan_words}{predicted}"


def measured_peak(device: Any) -> tuple[float | None, str]:
    """The run's peak memory in GiB and what it is: the CUDA allocator's peak on a GPU, the
    process's peak RSS on the CPU (None: not measured)."""
    kind = getattr(device, "type", str(device))
    if kind == "cuda":
        import torch

        return torch.cuda.max_memory_allocated(device) / GIB, CUDA_LABEL
    if kind == "cpu":
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
        scale = 1.0 if sys.platform == "darwin" else 1024.0
        return peak * scale / GIB, RSS_LABEL
    return None, "not measured"


def _against(measured: float | None, predicted: float | None) -> str:
    if measured is None or predicted is None:
        return ""
    ratio = measured / predicted
    return f", {ratio:.3g}x the prediction"


def end_line(
    expected: Expected, peak: tuple[float | None, str], step_s: float | None
) -> tuple[str, dict[str, float]]:
    """The closing line (measured beside predicted) and its metrics."""
    value, label = peak
    metrics: dict[str, float] = {}
    if value is not None:
        metrics[PEAK_METRIC] = value
        peak_text = f"peak memory {_g(value)} GiB ({label})"
    else:
        peak_text = f"peak memory {label}"
    if expected.peak_gib is not None:
        peak_text += f" vs predicted {expected.peak_words()}"
        if label == CUDA_LABEL:
            peak_text += _against(value, expected.peak_gib)
    if step_s is not None:
        metrics[STEP_METRIC] = step_s
        step_text = f"steady step {_g(step_s)} s (median of steps 2..n)"
    else:
        step_text = "steady step not measured (fewer than 2 steps)"
    if expected.step_s is not None:
        step_text += f" vs predicted {_g(expected.step_s)} s{_against(step_s, expected.step_s)}"
    return f"advisor-train: measured {peak_text}; {step_text}", metrics
