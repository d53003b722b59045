"""A traced step's live bytes as lines over the micro-batch (issue #45): every tensor's size is
linear in the batch, so each moment of a step traced at two micro-batches is a line, and the
step's peak at any micro-batch is the highest of them; the upper envelope of each kind of
moment keeps the few lines that are highest somewhere."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

HOLDERS = (
    "parameters", "gathered_parameters", "gradients", "optimizer", "activations",
    "backward_temporaries", "batch",
)  # fmt: skip
TRACED_BATCHES = (2, 4)  # the two micro-batches traced (shapes grow linearly between them)
# The optimizer's tensors as (parameter group, elements, how many of that size in the group),
# sorted: what ZeRO-1 partitions over the GPUs (``ddp_lines``).
Sizes = tuple[tuple[int, int, int], ...]


class NotLinear(RuntimeError):
    """The step runs other ops at the two traced micro-batches (FSDP's collectives, say): its
    peak at another micro-batch must be traced there."""


@dataclass(frozen=True)
class PeakLines:
    """A step's live bytes under one plan as a function of the micro-batch ``b``: each moment
    of the step (after each op) holds ``at_low + (at_high - at_low) * (b - low) / (high - low)``
    bytes per holder, from the step traced at micro-batches ``low`` and ``high`` (tensor
    shapes grow linearly with the batch); only the moments that are the highest of their kind
    at some batch are kept (``envelope``). ``state`` is the optimizer state's
    bytes (the rest of ``optimizer`` is its step's temporaries); ``sizes`` the optimizer's
    tensors (``Sizes``), empty when unknown."""

    low: int
    high: int
    lines: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]
    state: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    sizes: Sizes = ()

    def at(self, micro_batch: int) -> dict[str, int]:
        """The live bytes by holder at the step's peak at ``micro_batch``."""
        f = (micro_batch - self.low) / (self.high - self.low)

        def value(line: tuple[tuple[int, ...], tuple[int, ...]]) -> list[float]:
            return [lo + (hi - lo) * f for lo, hi in zip(*line, strict=True)]

        best = max((value(line) for line in self.lines), key=sum)
        by = dict(zip(HOLDERS, (max(0, round(v)) for v in best), strict=True))
        opt = by.pop("optimizer")
        by["optimizer_state"] = min(opt, self.state)
        by["optimizer_temporaries"] = max(0, opt - self.state)
        return {k: v for k, v in by.items() if v}

    def to_dict(self) -> dict[str, Any]:
        return {
            "low": self.low, "high": self.high, "state": self.state, "notes": list(self.notes),
            "lines": [[list(lo), list(hi)] for lo, hi in self.lines],
            "sizes": [list(s) for s in self.sizes],
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PeakLines:
        lines = tuple((tuple(map(int, lo)), tuple(map(int, hi))) for lo, hi in d["lines"])
        sizes = tuple((int(g), int(n), int(c)) for g, n, c in d["sizes"])  # older: traced again
        return cls(int(d["low"]), int(d["high"]), lines, int(d["state"]), tuple(d["notes"]), sizes)


def envelope(
    low: tuple[tuple[int, ...], ...],
    high: tuple[tuple[int, ...], ...],
    span: int,
    first: float = -math.inf,
) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """The moments whose total is the largest at some micro-batch (the upper envelope of the
    lines through each moment's totals at the two traced batches, ``span`` apart), from
    ``first`` batches past the low one on (``1 - low``: a micro-batch holds one sample at
    least). The envelope is taken within each kind of moment (the holders it holds,
    ``kind``), so a kind that a deeper model's peak may reach is kept beside the others: the
    depths that ``layer_scaling`` carries then keep the same kinds of moment."""
    kinds: dict[tuple[bool, ...], list[int]] = {}
    for i, (lo, hi) in enumerate(zip(low, high, strict=True)):
        kinds.setdefault(kind(lo, hi), []).append(i)
    kept = sorted(i for moments in kinds.values() for i in _hull(low, high, span, first, moments))
    return tuple((low[i], high[i]) for i in kept)


def kind(lo: tuple[int, ...], hi: tuple[int, ...]) -> tuple[bool, ...]:
    """Which holders a moment holds bytes in (at either traced batch)."""
    return tuple(x > 0 or y > 0 for x, y in zip(lo, hi, strict=True))


def _hull(
    low: tuple[tuple[int, ...], ...],
    high: tuple[tuple[int, ...], ...],
    span: int,
    first: float,
    moments: list[int],
) -> list[int]:
    """The upper envelope of ``moments``' lines over the batches from ``first`` on."""
    best: dict[float, tuple[float, int]] = {}  # slope -> (total at the low batch, moment)
    for i in moments:
        slope, base = (sum(high[i]) - sum(low[i])) / span, float(sum(low[i]))
        if slope not in best or base > best[slope][0]:
            best[slope] = (base, i)
    hull: list[tuple[float, float, int]] = []  # (slope, base, moment), slopes rising
    for slope in sorted(best):
        base, i = best[slope]
        while hull and _above(hull[-1], (slope, base, i), hull[-2] if len(hull) > 1 else None):
            hull.pop()
        hull.append((slope, base, i))
    while len(hull) > 1 and _crossing(hull[0], hull[1]) <= first:  # highest only before first
        hull.pop(0)
    return [i for _, _, i in hull]


def _crossing(a: tuple[float, float, int], b: tuple[float, float, int]) -> float:
    """Where ``b`` (steeper) overtakes ``a``, in batches past the low one."""
    return (a[1] - b[1]) / (b[0] - a[0])


def _above(last: tuple[float, float, int], new: tuple[float, float, int], before: Any) -> bool:
    """Whether ``last`` is never the highest once ``new`` (steeper) is added: ``new``
    overtakes ``before`` no later than ``last`` does (the upper hull of lines over every
    batch, so the lines of small batches are kept too)."""
    if before is None:
        return False
    x_new = (before[1] - new[1]) / (new[0] - before[0])
    x_last = (before[1] - last[1]) / (last[0] - before[0])
    return x_new <= x_last
