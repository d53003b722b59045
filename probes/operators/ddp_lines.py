"""DDP's traced step read as two of its layouts (issue #49): its two micro-steps and ZeRO-1.

**Two micro-steps.** Under DDP (``advisor.train``: ``gradient_as_bucket_view``, the gradients
zeroed in place) the gradients are the all-reduce buckets, held through the whole step, so a
second micro-step runs the first one's ops over the same tensors: the step of two micro-steps
holds what the step of one holds at every moment, with the whole batch (both micro-batches'
inputs, split from it) and the first micro-step's loss (a scalar in the running total) beside
it. Traced apart, the two differed by exactly that scalar, 4 bytes, in 16 layouts of fcn,
simple-cnn, GPT-2 mini and an 8-block GPT-2 (fp32 and bf16, with and without checkpointed
blocks, micro-batches 1-64; stop 64), so the second is read from the first: one trace a
layout fewer. (On one GPU the gradients are freed before each step, so its first micro-step
runs without them: traced.)

**ZeRO-1.** Under ZeRO-1 (``ZeroRedundancyOptimizer`` over DDP, as ``advisor.train`` runs it)
each GPU runs DDP's step (the same forward, backward and gradient buckets) with the optimizer
over its own partition of the parameters: its state, and its step's multi-tensor
temporaries, are over that partition's elements alone. So the step's peak lines on ``ranks``
GPUs are DDP's with the ``optimizer`` holder scaled at every moment: the state by the worst partition's share of the
elements, the step's temporaries by the worst share of one parameter group (each group's
multi-tensor step runs over that group's tensors, one group at a time). Both are upper ends:
a rank holding less of a group than the worst share holds less of its temporaries.

The partition is ``ZeroRedundancyOptimizer``'s own rule (each group's tensors largest first,
each to the rank holding the fewest elements so far), on the optimizer's tensor sizes kept
with DDP's trace (``PeakLines.sizes``). A deep model's are carried to its own depth with its
lines (``layer_scaling``), so its partition is the deep model's: GPT-3 13B's worst of 8
partitions holds 1,625 M elements, where the line through the worst partitions of its 4- and
6-block models, traced under ZeRO-1, reached 816 M (half the state: stop 64). The ZeRO-1 step
traced on fake tensors (``plan_peak.trace_plan_peak``) is the reference the tests hold this to.
"""

from __future__ import annotations

import dataclasses

from advisor.probes.operators.peak_lines import HOLDERS, PeakLines, Sizes

LOSS_BYTES = 8  # the first micro-step's loss in the running total: a scalar, float64 at most


def two_micro_steps(one: PeakLines) -> PeakLines:
    """The peak lines of DDP's step of two micro-steps from its step of one (``one``): every
    moment holds the whole batch (twice the micro-batch's) and the first micro-step's loss."""
    at = HOLDERS.index("batch")

    def second(moment: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(2 * v + LOSS_BYTES if i == at else v for i, v in enumerate(moment))

    lines = tuple((second(lo), second(hi)) for lo, hi in one.lines)
    note = "DDP: two micro-steps read from one (the buckets hold the gradients through both)"
    return dataclasses.replace(one, lines=lines, notes=(*one.notes, note))


def assign(groups: list[list[int]], ranks: int) -> list[list[int]]:
    """The rank of each tensor (given by its elements, per parameter group) under
    ``ZeroRedundancyOptimizer``'s partition over ``ranks``: each group's tensors largest
    first, each to the rank holding the fewest elements so far, across the groups."""
    totals = [0] * ranks
    out = []
    for sizes in groups:
        ranked = [0] * len(sizes)
        for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
            ranked[i] = totals.index(min(totals))
            totals[ranked[i]] += sizes[i]
        out.append(ranked)
    return out


def rank_loads(sizes: Sizes, ranks: int) -> list[list[int]]:
    """Each rank's elements in each parameter group under ``assign``'s partition of ``sizes``
    over ``ranks``."""
    groups = sorted({g for g, _, _ in sizes})
    each = [[n for h, n, count in sizes if h == g for _ in range(count)] for g in groups]
    loads = [[0] * len(groups) for _ in range(ranks)]
    for gi, (elements, ranked) in enumerate(zip(each, assign(each, ranks), strict=True)):
        for n, rank in zip(elements, ranked, strict=True):
            loads[rank][gi] += n
    return loads


def worst_shares(sizes: Sizes, ranks: int) -> tuple[float, float]:
    """The largest share of all the elements one rank holds (its optimizer state's) and the
    largest share of one group's elements one rank holds (its step's temporaries)."""
    loads = rank_loads(sizes, ranks)
    group_totals = [sum(col) for col in zip(*loads, strict=True)]
    total = sum(group_totals)
    state = max(sum(row) for row in loads) / total
    step = max(row[g] / t for row in loads for g, t in enumerate(group_totals) if t)
    return state, step


def zero1_lines(ddp: PeakLines, ranks: int) -> PeakLines:
    """The peak lines of ZeRO-1's step on one of ``ranks`` GPUs from DDP's (``ddp``, traced
    with the gradients held as its buckets); DDP's own where its tensor sizes are unknown
    (an upper bound: ZeRO-1 only takes optimizer state away)."""
    if not ddp.sizes or ranks <= 1:
        note = "ZeRO-1: the optimizer's tensors unknown, DDP's step (an upper bound)"
        return dataclasses.replace(ddp, notes=(*ddp.notes, note))
    state_share, step_share = worst_shares(ddp.sizes, ranks)
    at = HOLDERS.index("optimizer")

    def scaled(moment: tuple[int, ...]) -> tuple[int, ...]:
        held = moment[at]
        state = min(held, ddp.state)
        out = list(moment)
        out[at] = round(state * state_share + (held - state) * step_share)
        return tuple(out)

    lines = tuple((scaled(lo), scaled(hi)) for lo, hi in ddp.lines)
    note = (
        f"ZeRO-1: the largest of {ranks} optimizer partitions ({state_share:.1%} of the "
        "optimizer's elements), from DDP's traced step"
    )
    return dataclasses.replace(
        ddp, lines=lines, state=round(ddp.state * state_share), notes=(*ddp.notes, note)
    )
