"""A deep ``hf:`` model's plan peak from two shallow traces (issue #48).

Tracing every op of a 32-block 8B model on fake tensors takes minutes (157 s for one
micro-batch of Llama 3.1 8B under LoRA on this machine), and the plan search needs a pair of
traces per plan layout. The blocks of a decoder are alike, so every holder's bytes at the
step's peak moments grow linearly with the number of blocks: the step is traced with
``SHALLOW`` blocks (the family's real widths, vocabulary and head), each at the two traced
micro-batches, and each peak moment's bytes are carried to the model's own depth along the
line through the two depths. Two blocks apart, so that models alternating two kinds of block
(Gemma 2's sliding and global attention) add a whole pair per step. Where the two traces'
peak moments do not correspond (another count of envelope lines), the model is traced whole.
``benchmarks/fine_tuning.py`` compares the scaled peak with the whole trace.
"""

from __future__ import annotations

from typing import Any

from advisor.probes.operators.peak_lines import PeakLines

SHALLOW = (2, 4)  # the depths traced


def scaled_lines(workload: str, trace: Any) -> PeakLines | None:
    """The peak lines of ``workload`` (an ``hf:`` reference) at its own depth from
    ``trace(shallow_workload) -> PeakLines`` at the ``SHALLOW`` depths; None when the model is
    not deeper than them or the two traces' peak moments do not correspond."""
    from advisor.search_spaces.hf import parse
    from advisor.search_spaces.hf.build import config_of

    ref = parse(workload)
    depth = int(config_of(ref).num_hidden_layers)
    a, b = SHALLOW
    if depth <= b or ref.method == "frozen":  # frozen=N counts blocks of the real depth
        return None
    small = [trace(ref.with_options(layers=n).text()) for n in SHALLOW]
    if len(small[0].lines) != len(small[1].lines) or (small[0].low, small[0].high) != (
        small[1].low,
        small[1].high,
    ):
        return None
    f = (depth - a) / (b - a)

    def carry(x: tuple[int, ...], y: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(max(0, round(u + (v - u) * f)) for u, v in zip(x, y, strict=True))

    lines = tuple(
        (carry(lo_a, lo_b), carry(hi_a, hi_b))
        for (lo_a, hi_a), (lo_b, hi_b) in zip(small[0].lines, small[1].lines, strict=True)
    )
    state = round(small[0].state + (small[1].state - small[0].state) * f)
    note = f"{depth} blocks carried from traces of {a} and {b} blocks (linear in the depth)"
    return PeakLines(small[0].low, small[0].high, lines, state, (*small[1].notes, note))
