"""A deep ``hf:`` model's plan peak and operator trace from two shallow traces (issue #48);
the plan peak of any builder that declares its depth likewise (issue #46): a ``blocks``
attribute (its number of alike blocks) and a ``layers=`` keyword that builds fewer
(``examples/transformers.py``'s GPT-2, GPT-3 and BERT builders).

Tracing every op of a 32-block 8B model on fake tensors takes minutes (157 s for one
micro-batch of Llama 3.1 8B under LoRA on this machine), and the plan search needs a pair of
traces per plan layout. The blocks of a decoder are alike, so every holder's bytes at the
step's peak moments grow linearly with the number of blocks: the step is traced with
``SHALLOW`` blocks (the family's real widths, vocabulary and head), each at the two traced
micro-batches, and each peak moment's bytes are carried to the model's own depth along the
line through the two depths. Two blocks apart, so that models alternating two kinds of block
(Gemma 2's sliding and global attention) add a whole pair per step. Each moment is carried
with the moment of its kind (the holders it holds bytes in, ``peak_lines.kind``) in the same
place at the other depth; where the two traces keep other kinds of moment, or another count of
one, the model is traced whole. ``benchmarks/fine_tuning.py`` (``hf:``) and
``benchmarks/depth_carry.py`` (declared builders) compare the carried peak with the whole trace.

The operator trace (the step's kernels, for its time) is carried the same way, an ``hf:``
model's from ``SHALLOW`` and a declared builder's from ``DECLARED_SHALLOW``: each kernel's
call count (the same kernel: the same kind, phase, shapes and dtype) on the line through the
two depths, the parameters and the memory figures likewise; the optimizer's multi-tensor
kernels, whose shapes are the whole parameter list's (and which the trace may split into other
chunks), are carried by name: their calls and their total tensors, elements, FLOPs and bytes;
a kernel whose count would fall below one, or a trace that is not a meta-device one, leaves
the model traced whole.
"""

from __future__ import annotations

from typing import Any

from advisor.probes.operators.peak_lines import PeakLines, Sizes, kind

SHALLOW = (2, 4)  # the depths traced
# The deeper depths tried in turn when a pair's peak moments do not correspond, each pair the
# last one's deeper trace and one two blocks deeper, before the model is traced whole. Llama
# 3.1 8B under QLoRA and FSDP: at 2 blocks one kind of moment peaks twice, at 4 once; 4 and 6
# carry to 8 exactly. Under full fine-tuning, float32 and FSDP without checkpointing: 4 and 6
# do not correspond either, 6 and 8 carry to 32 exactly (stop 65; its whole trace 15-22 s)
DEEPER = (6, 8)
# A declared builder's depths: four blocks and more put its peak at the moment of the whole
# model's (at two, a GPT-2's embedding and head outweigh its blocks: another moment peaks)
DECLARED_SHALLOW = (4, 6)
# The depths tried next when those two do not correspond (GPT-2 Large under bf16 with
# checkpointed blocks: two moments of one kind on the upper envelope from 6 blocks on, one at
# 4; 6 and 8 carry to 36 blocks exactly, stop 64), before the model is traced whole
DECLARED_DEEPER = (8,)
Line = tuple[tuple[int, ...], tuple[int, ...]]  # a moment's bytes by holder at the two batches


def depth_of(workload: str) -> tuple[Any, int] | None:
    """The parsed reference and its depth when it is deeper than ``SHALLOW`` (None: trace it
    whole). Frozen blocks count the real depth's blocks: such a model is traced whole."""
    from advisor.search_spaces.hf import parse
    from advisor.search_spaces.hf.build import config_of

    ref = parse(workload)
    depth = int(config_of(ref).num_hidden_layers)
    if depth <= SHALLOW[1] or ref.method == "frozen":
        return None
    return ref, depth


def declared_depth(workload: str, hyperparameters: dict[str, Any] | None) -> int | None:
    """The depth a ``module:function`` builder declares (its ``blocks``), when it is deeper than
    ``DECLARED_SHALLOW`` and ``layers`` is not already fixed; None otherwise (traced whole)."""
    if workload.startswith("hf:") or ":" not in workload or "layers" in (hyperparameters or {}):
        return None
    from advisor.search_spaces.workloads import load_callable

    try:
        blocks = getattr(load_callable(workload), "blocks", None)
    except Exception:  # not importable here: the whole trace says why
        return None
    return int(blocks) if isinstance(blocks, int) and blocks > DECLARED_SHALLOW[1] else None


def shallow_hyperparameters(hyperparameters: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A declared builder's hyperparameters at each of the ``DECLARED_SHALLOW`` depths."""
    return [{**(hyperparameters or {}), "layers": n} for n in DECLARED_SHALLOW]


def carried_declared_trace(small: list[Any], workload: str, depth: int) -> Any:
    """The operator trace at ``depth`` blocks from the ``DECLARED_SHALLOW`` depths' (traced
    apart); None where it cannot be carried."""
    return _carried_trace(small, workload, depth, DECLARED_SHALLOW)


def scaled_declared_lines(
    workload: str, hyperparameters: dict[str, Any] | None, trace: Any
) -> PeakLines | None:
    """The peak lines of a builder that declares its depth (``declared_depth``) from
    ``trace(hyperparameters) -> PeakLines`` at the ``DECLARED_SHALLOW`` depths (``layers=``),
    else from 6 and 8 (``DECLARED_DEEPER``: ``carried_deeper``); None when it declares none or no
    pair's moments correspond (``_carried``)."""
    depth = declared_depth(workload, hyperparameters)
    if depth is None:
        return None
    small = [trace(hps) for hps in shallow_hyperparameters(hyperparameters)]
    return carried_deeper(small, depth, DECLARED_SHALLOW, DECLARED_DEEPER,
                          lambda n: trace({**(hyperparameters or {}), "layers": n}))  # fmt: skip


def carried_deeper(
    small: list[PeakLines], depth: int, depths: tuple[int, int], deeper: tuple[int, ...],
    trace_at: Any,
) -> PeakLines | None:  # fmt: skip
    """The peak lines at ``depth`` blocks from ``small`` (traced at ``depths``), else from
    each pair along ``deeper`` (``trace_at(blocks) -> PeakLines`` adds one depth a pair, the
    last pair's deeper trace kept) while the model is deeper than the pair; None when no pair's
    moments correspond (``_carried``)."""
    carried = _carried(small, depth, depths)
    below = depths[1]
    for n in deeper:
        if carried is not None or depth <= n:
            break
        small, pair = [small[1], trace_at(n)], (below, n)
        carried, below = _carried(small, depth, pair), n
    return carried


def scaled_trace(workload: str, trace: Any) -> Any:
    """The operator trace of ``workload`` (an ``hf:`` reference) at its own depth from
    ``trace(shallow_workload) -> OperatorTrace`` at the ``SHALLOW`` depths; None when it
    cannot be carried (see the module)."""
    found = depth_of(workload)
    if found is None:
        return None
    ref, depth = found
    small = [trace(ref.with_options(layers=n).text()) for n in SHALLOW]
    return _carried_trace(small, workload, depth, SHALLOW)


def scaled_declared_trace(workload: str, hyperparameters: dict[str, Any] | None, trace: Any) -> Any:
    """The operator trace of a builder that declares its depth (``declared_depth``) from
    ``trace(hyperparameters) -> OperatorTrace`` at the ``DECLARED_SHALLOW`` depths
    (``layers=``); None when it declares none or the traces cannot be carried."""
    depth = declared_depth(workload, hyperparameters)
    if depth is None:
        return None
    small = [trace(hps) for hps in shallow_hyperparameters(hyperparameters)]
    return carried_declared_trace(small, workload, depth)


def _carried_trace(small: list[Any], workload: str, depth: int, depths: tuple[int, int]) -> Any:
    """The operator trace at ``depth`` blocks on the line through ``small`` (at ``depths``);
    None where it cannot be carried (see the module)."""
    import dataclasses

    from advisor.probes.operators.types import Operator

    a, b = depths
    if any(t.executed for t in small):
        return None
    f = (depth - a) / (b - a)
    steps = [_by_name([o for o in t.operators if o.phase == "optimizer"]) for t in small]
    if set(steps[0]) != set(steps[1]):
        return None
    first = {o.key: o for o in small[0].operators if o.phase != "optimizer"}
    second = {o.key: o for o in small[1].operators if o.phase != "optimizer"}
    operators = []
    for key in dict.fromkeys([*first, *second]):
        lo = first[key].count if key in first else 0
        hi = second[key].count if key in second else 0
        count = round(lo + (hi - lo) * f)
        if count < 1:
            return None
        op: Operator = second.get(key) or first[key]
        operators.append(dataclasses.replace(op, count=count))
    for name, (op, x) in steps[1].items():  # multi-tensor kernels over more tensors
        w = steps[0][name][1]
        total = {k: w.get(k, v) + (v - w.get(k, v)) * f for k, v in x.items()}
        calls = max(1, round(total.pop("calls")))
        operators.append(dataclasses.replace(
            op, count=calls, flops=max(0.0, total.pop("flops") / calls),
            bytes=max(0.0, total.pop("bytes") / calls),
            dims={**op.dims, **{k: max(1, round(v / calls)) for k, v in total.items()}},
        ))  # fmt: skip

    def carry(x: dict[str, int], y: dict[str, int]) -> dict[str, int]:
        return {k: max(0, round(x.get(k, 0) + (y.get(k, 0) - x.get(k, 0)) * f)) for k in y}

    note = f"{depth} blocks carried from traces of {a} and {b} blocks (kernel counts linear)"
    return dataclasses.replace(
        small[1], workload=workload, operators=tuple(operators),
        parameters=round(small[0].parameters + (small[1].parameters - small[0].parameters) * f),
        memory_bytes=carry(small[0].memory_bytes, small[1].memory_bytes),
        peak_memory=carry(small[0].peak_memory, small[1].peak_memory),
        notes=(*small[1].notes, note),
    )  # fmt: skip


def _by_name(ops: list[Any]) -> dict[str, tuple[Any, dict[str, float]]]:
    """The optimizer's kernels by name: one of them, and their totals over every call (calls,
    FLOPs, bytes, elements and tensors)."""
    out: dict[str, tuple[Any, dict[str, float]]] = {}
    for o in ops:
        _, total = out.setdefault(o.name, (o, {"calls": 0.0, "flops": 0.0, "bytes": 0.0}))
        total["calls"] += o.count
        total["flops"] += o.flops * o.count
        total["bytes"] += o.bytes * o.count
        for k in ("numel", "tensors", "blocks"):
            if k in o.dims:
                total[k] = total.get(k, 0.0) + o.dims[k] * o.count
    return out


def scaled_lines(workload: str, trace: Any, each: Any = None) -> PeakLines | None:
    """The peak lines of ``workload`` (an ``hf:`` reference) at its own depth from
    ``trace(shallow_workload) -> PeakLines`` at the ``SHALLOW`` depths, else along ``DEEPER``
    (4 and 6, then 6 and 8: ``carried_deeper``); None when the model is not deeper than them
    or no pair's peak moments correspond. ``each(workloads) -> [PeakLines]``, when given,
    traces the ``SHALLOW`` pair (side by side, ``advisor.probes.isolated.call_isolated_each``)."""
    found = depth_of(workload)
    if found is None:
        return None
    ref, depth = found
    shallow = [ref.with_options(layers=n).text() for n in SHALLOW]
    small = each(shallow) if each is not None else [trace(w) for w in shallow]
    return carried_deeper(small, depth, SHALLOW, DEEPER,
                          lambda n: trace(ref.with_options(layers=n).text()))  # fmt: skip


def _carried(
    small: list[PeakLines], depth: int, depths: tuple[int, int] = SHALLOW
) -> PeakLines | None:
    """The peak lines at ``depth`` blocks on the line through ``small`` (at ``depths``), each
    moment carried with the moment of its kind (``peak_lines.kind``) in the same place among
    them; None where the two traces keep other kinds of moment or another count of one."""
    a, b = depths
    if (small[0].low, small[0].high) != (small[1].low, small[1].high):
        return None
    kinds = [_by_kind(s.lines) for s in small]
    if {k: len(v) for k, v in kinds[0].items()} != {k: len(v) for k, v in kinds[1].items()}:
        return None
    f = (depth - a) / (b - a)

    def carry(x: tuple[int, ...], y: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(max(0, round(u + (v - u) * f)) for u, v in zip(x, y, strict=True))

    lines = tuple(
        (carry(lo_a, lo_b), carry(hi_a, hi_b))
        for k in kinds[1]
        for (lo_a, hi_a), (lo_b, hi_b) in zip(kinds[0][k], kinds[1][k], strict=True)
    )
    state = round(small[0].state + (small[1].state - small[0].state) * f)
    note = f"{depth} blocks carried from traces of {a} and {b} blocks (linear in the depth)"
    return PeakLines(small[0].low, small[0].high, lines, state, (*small[1].notes, note),
                     _carried_sizes(small[0].sizes, small[1].sizes, f))  # fmt: skip


def _carried_sizes(a: Sizes, b: Sizes, f: float) -> Sizes:
    """The optimizer's tensors (``peak_lines.Sizes``) at the carried depth: each size's count on
    the line through the two depths' (a block's tensors repeat); empty (unknown) where a count
    would not be a whole number of tensors."""
    counts = [{(g, n): c for g, n, c in s} for s in (a, b)]
    out = []
    for key in sorted({*counts[0], *counts[1]}):
        lo, hi = counts[0].get(key, 0), counts[1].get(key, 0)
        count = lo + (hi - lo) * f
        if count < 0 or abs(count - round(count)) > 1e-9:
            return ()
        if round(count):
            out.append((*key, round(count)))
    return tuple(out) if a and b else ()


def _by_kind(lines: tuple[Line, ...]) -> dict[tuple[bool, ...], list[Line]]:
    """The lines by the kind of their moment, in the step's order."""
    out: dict[tuple[bool, ...], list[Line]] = {}
    for line in lines:
        out.setdefault(kind(*line), []).append(line)
    return out
