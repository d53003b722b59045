"""Issue #49: FSDP's step on many ranks carried from its traces on two and four ranks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from advisor.probes.operators.replica_carry import TRACED_RANKS, RankTraces, carried, carries

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


def test_whole_and_sharded_bytes_are_carried_exactly_to_more_ranks() -> None:
    asked: list[int] = []

    def traced(ranks: int) -> _Step:
        asked.append(ranks)
        return _step(ranks)

    for ranks in (8, 16, 64):
        got = carried(ranks, traced)
        assert got is not None
        assert got.timeline == _step(ranks).timeline and got.state == _step(ranks).state
        assert got.notes == ("bf16", f"FSDP2 over {ranks} ranks, carried from traces over 2 and "
                             "4 (shards as 1/ranks)")  # fmt: skip
    assert set(asked) == set(TRACED_RANKS)  # the two traced rank counts only


def test_other_ops_on_the_two_rank_counts_are_not_carried() -> None:
    assert carried(8, lambda ranks: _step(ranks, extra_op=ranks == 4)) is None


def test_only_fsdp_over_more_ranks_than_traced_is_carried() -> None:
    assert carries(8, "parameters") and carries(64, "gradients")
    assert not carries(TRACED_RANKS[1], "parameters")  # traced on its own ranks
    assert not carries(8, "optimizer")  # ZeRO-1's largest partition holds whole tensors
    assert not carries(8, "none")


def test_rank_traces_make_each_key_once_and_drop_the_least_recent() -> None:
    kept = RankTraces(bound=2)
    made: list[str] = []

    def make(key: str) -> str:
        made.append(key)
        return key.upper()

    for key in ("a", "b", "a", "c", "b"):
        assert kept.get_or_make(key, lambda k=key: make(k)) == key.upper()
    assert made == ["a", "b", "c", "b"]  # "b" was the least recent when "c" came


@pytest.mark.slow  # about 10 s: the step traced on 2, 4 and 8 ranks
def test_a_real_fsdp_step_on_eight_ranks_is_its_carry(monkeypatch: pytest.MonkeyPatch) -> None:
    """GPT-2's blocks under ZeRO-3 and under ZeRO-2: every moment's bytes on 8 ranks, carried,
    equal the step traced on 8 ranks (its widths divide by 8: no row of padding)."""
    from advisor.probes.operators.plan_peak import step_peak, trace_plan_peak

    from advisor.prediction.step.plan import parse_plan

    monkeypatch.syspath_prepend(str(ROOT))  # examples/, as the isolated worker finds it
    for sharding in ("parameters", "gradients"):
        plan = parse_plan(f"precision=bf16,sharding={sharding}")
        args = ("trace_user_models:deep_mini", 2, plan, {"layers": 4})
        traced = trace_plan_peak(*args, replicas=8, sharding=sharding)
        carry = step_peak(*args, replicas=8, sharding=sharding)
        assert "carried from traces over 2 and 4" in carry.notes[-1]
        assert carry.timeline == traced.timeline and carry.state == traced.state
