"""Issue #49: FSDP's step on many ranks carried from its traces on two rank counts."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from advisor.probes.operators.replica_carry import (
    LOW_RANKS,
    RANK_TRACES,
    RankTraces,
    carried,
    carries,
)

ROOT = Path(__file__).resolve().parents[3]


@dataclasses.dataclass(frozen=True)
class _Step:
    """A traced step as ``carried`` reads one (``plan_peak.PlanPeak``'s fields)."""

    timeline: tuple[tuple[int, ...], ...]
    state: int
    notes: tuple[str, ...] = ()


WHOLE = ((0, 512, 100, 0, 4096, 64, 32), (0, 0, 200, 0, 8192, 0, 32))  # the same on any ranks
SHARDS = ((8192, 0, 4096, 16384, 0, 0, 0), (8192, 0, 8192, 16384, 0, 0, 0))  # split over them


def _step(ranks: int, extra_op: bool = False) -> _Step:
    """Each moment's bytes: a whole part and a part split over ``ranks``."""
    timeline = tuple(
        tuple(w + s // ranks for w, s in zip(whole, shard, strict=True))
        for whole, shard in zip(WHOLE, SHARDS, strict=True)
    )
    if extra_op:
        timeline += (timeline[-1],)
    return _Step(timeline, 16384 // ranks, (f"FSDP2 over {ranks} ranks, tracked", "bf16"))


def test_whole_and_sharded_bytes_are_carried_exactly_to_other_ranks() -> None:
    for low, high in ((2, 4), (2, 64)):
        for ranks in (8, 16, 64):
            got = carried(ranks, _step(low), _step(high), low, high)
            assert got is not None
            assert got.timeline == _step(ranks).timeline and got.state == _step(ranks).state
            assert got.notes == ("bf16", f"FSDP2 over {ranks} ranks, carried from traces over "
                                 f"{low} and {high} (shards as 1/ranks)")  # fmt: skip


def test_other_ops_on_the_two_rank_counts_are_not_carried() -> None:
    assert carried(8, _step(2), _step(4, extra_op=True), 2, 4) is None


def test_fsdp_on_several_ranks_goes_through_the_kept_traces() -> None:
    assert carries(LOW_RANKS, "parameters") and carries(64, "gradients")
    assert not carries(1, "parameters")  # one GPU: nothing to shard over
    assert not carries(8, "optimizer")  # ZeRO-1's largest partition holds whole tensors
    assert not carries(8, "none")


def test_a_layout_is_traced_as_asked_first_then_on_two_ranks_then_never() -> None:
    """The first rank count is traced as asked (no dearer than without the carry); the second
    traces the step on two ranks and is carried from it and the first; the rest are carried;
    a pair that runs other ops leaves the count traced on its own."""
    kept = RankTraces()
    traced: list[int] = []

    def trace(ranks: int) -> _Step:
        traced.append(ranks)
        return _step(ranks)

    assert kept.step("zero3", 64, trace) == _step(64) and traced == [64]
    assert kept.step("zero3", 16, trace).timeline == _step(16).timeline and traced == [64, 2]
    assert kept.step("zero3", 8, trace).timeline == _step(8).timeline and traced == [64, 2]
    assert kept.step("zero3", 64, trace) == _step(64) and traced == [64, 2]  # kept
    odd: list[int] = []

    def other_ops(ranks: int) -> _Step:
        odd.append(ranks)
        return _step(ranks, extra_op=ranks != LOW_RANKS)

    assert kept.step("zero2", 8, other_ops) == _step(8, extra_op=True)
    assert kept.step("zero2", 16, other_ops) == _step(16, extra_op=True) and odd == [8, 2, 16]


def test_rank_traces_keep_at_most_their_bound_of_layouts() -> None:
    kept = RankTraces(bound=2)
    traced: list[tuple[str, int]] = []
    for family in ("a", "b", "a", "c", "b"):
        kept.step(family, 8, lambda r, f=family: traced.append((f, r)) or _step(r))
    assert traced == [("a", 8), ("b", 8), ("c", 8), ("b", 8)]  # "b" the least recent at "c"


@pytest.mark.slow  # about 10 s: the step traced on 2, 4 and 8 ranks
def test_a_real_fsdp_step_on_eight_ranks_is_its_carry(monkeypatch: pytest.MonkeyPatch) -> None:
    """GPT-2's blocks under ZeRO-3 and under ZeRO-2: every moment's bytes on 8 ranks, carried
    from 2 and 16 ranks (a search that traced 16 first), equal the step traced on 8 ranks (its
    widths divide by 16: no row of padding)."""
    from advisor.probes.operators.plan_peak import step_peak, trace_plan_peak

    from advisor.prediction.step.plan import parse_plan

    monkeypatch.syspath_prepend(str(ROOT))  # examples/, as the isolated worker finds it
    RANK_TRACES.clear()  # this layout's first rank count is the one asked first here
    for sharding in ("parameters", "gradients"):
        plan = parse_plan(f"precision=bf16,sharding={sharding}")
        args = ("trace_user_models:deep_mini", 2, plan, {"layers": 4})
        traced = trace_plan_peak(*args, replicas=8, sharding=sharding)
        first = step_peak(*args, replicas=16, sharding=sharding)  # traced as asked
        assert "carried" not in first.notes[-1]
        carry = step_peak(*args, replicas=8, sharding=sharding)
        assert "carried from traces over 2 and 16" in carry.notes[-1]
        assert carry.timeline == traced.timeline and carry.state == traced.state


@pytest.mark.slow  # about 5 s: the step traced at two micro-steps on 16 and 2 ranks
def test_accumulation_four_reads_the_layout_that_accumulation_two_traced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two micro-steps stand for any two or more (``trace_plan_peak``): after a search traced
    a layout at accumulation 2 on two rank counts, the same layout at accumulation 4 on a
    third is carried, not traced again (GPT-3 13B's search traced the third count as often as
    the first two: 207 s of plan traces, 131 s once carried)."""
    from advisor.probes.operators import plan_peak

    from advisor.prediction.step.plan import parse_plan

    monkeypatch.syspath_prepend(str(ROOT))
    RANK_TRACES.clear()
    ranks: list[int] = []
    real = plan_peak.trace_plan_peak

    def counted(*args: object, **kw: object) -> object:
        ranks.append(int(kw["replicas"]))  # type: ignore[call-overload]
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(plan_peak, "trace_plan_peak", counted)
    args = ("trace_user_models:deep_mini", 2)
    two = parse_plan("precision=bf16,accumulation=2,sharding=parameters")
    four = dataclasses.replace(two, accumulation=4)
    plan_peak.step_peak(*args, two, {"layers": 4}, replicas=16, sharding="parameters")
    plan_peak.step_peak(*args, two, {"layers": 4}, replicas=8, sharding="parameters")
    carry = plan_peak.step_peak(*args, four, {"layers": 4}, replicas=4, sharding="parameters")
    assert ranks == [16, 2] and "carried from traces over 2 and 16" in carry.notes[-1]
    plan_peak.step_peak(*args, parse_plan("precision=bf16,accumulation=1,sharding=parameters"),
                        {"layers": 4}, replicas=4, sharding="parameters")  # fmt: skip
    assert ranks == [16, 2, 4]  # one micro-step is another step: traced as asked
