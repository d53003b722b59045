"""A trace summarised for people: the operators that dominate a step.

:func:`top_operators` ranks a trace's operators by a per-operator time (the GPU latency
model's prediction on a chosen machine; any ``Operator -> seconds per call`` function), with
their share of the step; :func:`render_top` needs no predictions and ranks by FLOPs or bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from advisor.probes.operators.types import Operator, OperatorTrace


@dataclass(frozen=True)
class OperatorShare:
    """One operator's part of a step: ``seconds`` for all ``count`` calls, ``share`` of the
    step's total (0..1)."""

    kind: str
    phase: str
    shape: str
    count: int
    seconds: float
    share: float

    def __post_init__(self) -> None:
        if self.seconds < 0 or not 0.0 <= self.share <= 1.0 + 1e-9:
            raise ValueError(f"need seconds >= 0 and share in [0, 1], got {self}")


def top_operators(
    trace: OperatorTrace, seconds_per_call: Callable[[Operator], float], n: int = 10
) -> list[OperatorShare]:
    """The ``n`` operators of ``trace`` with the most time per step (``seconds_per_call``
    times ``count``), largest first, each with its share of the whole step's time."""
    timed = [(o, max(0.0, float(seconds_per_call(o))) * o.count) for o in trace.operators]
    total = sum(t for _, t in timed)
    ranked = sorted(timed, key=lambda ot: ot[1], reverse=True)[:n]
    return [
        OperatorShare(o.kind, o.phase, shape_text(o), o.count, t, t / total if total else 0.0)
        for o, t in ranked
    ]


def render_shares(shares: Iterable[OperatorShare], unit: str = "ms") -> str:
    """Plain-text table of :func:`top_operators`' result."""
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    rows = [
        (
            s.kind,
            s.phase,
            s.shape,
            str(s.count),
            f"{s.seconds * scale:.3g} {unit}",
            f"{s.share:.1%}",
        )
        for s in shares
    ]
    return _table(("kind", "phase", "shape", "count", "time", "share"), rows)


def render_top(trace: OperatorTrace, by: str = "flops", n: int = 10) -> str:
    """Plain-text table of the ``n`` operators with the most FLOPs (or ``bytes``) per step,
    with their share of the step's total; no prediction needed."""
    if by not in ("flops", "bytes"):
        raise ValueError(f"by must be flops or bytes, but got {by!r}")

    def amount(o: Operator) -> float:
        return (o.flops if by == "flops" else o.bytes) * o.count

    total = sum(amount(o) for o in trace.operators)
    ranked = sorted(trace.operators, key=amount, reverse=True)[:n]
    unit = "GFLOP" if by == "flops" else "MB"
    scale = 1e9 if by == "flops" else 1e6
    rows = [
        (
            o.kind,
            o.phase,
            shape_text(o),
            str(o.count),
            f"{amount(o) / scale:,.3g} {unit}",
            f"{amount(o) / total:.1%}" if total else "-",
        )
        for o in ranked
    ]
    head = (
        f"{trace.workload}, batch {trace.batch_size}: {len(trace.operators)} operators, "
        f"{trace.launches} launches, {trace.flops / 1e9:,.1f} GFLOP per step "
        f"({'run on the CPU' if trace.executed else 'traced without running'})"
    )
    return head + "\n" + _table(("kind", "phase", "shape", "count", by, "share"), rows)


def shape_text(o: Operator) -> str:
    """A short description of an operator's shape, e.g. ``1024x1280 @ 1280x3840``."""
    d = o.dims
    if o.kind in ("linear", "bmm"):
        batch = f"{d['B']} x " if d.get("B", 1) != 1 or o.kind == "bmm" else ""
        text = f"{batch}{d['M']}x{d['K']} @ {d['K']}x{d['N']}"
    elif o.kind == "conv":
        k = f"{d['kernel']}x{d.get('kernel_w', d['kernel'])}"
        text = (
            f"B={d['B']} {k} {d['Cin']}->{d['Cout']} on {d['H']}x{d['W']} "
            f"s{d['stride']} p{d['padding']}" + (f" g{d['groups']}" if d["groups"] > 1 else "")
        )
    elif o.kind in ("layernorm", "softmax"):
        text = f"{d['B']} x {d['H']}"
    elif o.kind == "optimizer":
        text = f"{d['numel']:,} elements, {d['tensors']} tensors a launch"
    elif o.kind == "embedding":
        text = f"{d['numel']:,} of {d['rows']:,} rows"
    else:
        text = f"{d.get('numel', 0):,}" + (f" -> {d['out']:,}" if "out" in d else "")
    return f"{o.op} {text}" if o.op and o.op != "forward" else text


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in (header, *rows)
    ]
    return "\n".join(lines)
