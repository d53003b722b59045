"""DDP's traced step read as its two micro-steps and as ZeRO-1 (stop 64): each is the step
traced on fake tensors, the partition is PyTorch's own, and a deep model's partition is the
deep model's, not a line through its shallow models' partitions."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from advisor.probes.operators.ddp_lines import (
    LOSS_BYTES,
    rank_loads,
    two_micro_steps,
    worst_shares,
    zero1_lines,
)
from advisor.probes.operators.peak_lines import PeakLines
from advisor.probes.operators.plan_peak import lines_here, optimizer_sizes

from advisor.prediction.step.plan import parse_plan

ROOT = Path(__file__).resolve().parents[3]
MINI = "examples.transformers:gpt2_mini"


@pytest.fixture(autouse=True)
def _repo_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))


def _optimizer(builder: str, **kw: int):  # type: ignore[no-untyped-def]
    import torch

    module, name = builder.split(":")
    __import__(module)
    with torch.device("meta"):
        return getattr(sys.modules[module], name)(**kw)[2]


@pytest.mark.parametrize("ranks", [2, 3, 8])
def test_the_partition_is_zero_redundancy_optimizers_own(ranks: int) -> None:
    """``rank_loads`` on the optimizer's tensor sizes gives each rank the elements PyTorch's
    ``ZeroRedundancyOptimizer`` gives it (over a fake process group of ``ranks``)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from examples.transformers import gpt2_mini

    model = gpt2_mini()[0]
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=ranks)
    try:
        zero = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW)
        theirs = [sum(p.numel() for g in r for p in g["params"])
                  for r in zero._partition_parameters()]  # fmt: skip
    finally:
        dist.destroy_process_group()
    ours = rank_loads(optimizer_sizes(torch.optim.AdamW(model.parameters())), ranks)
    assert [sum(r) for r in ours] == theirs


def test_two_groups_take_the_worst_share_of_each() -> None:
    """The state's share is of all the elements; the step's temporaries' the largest share of
    one group a rank holds (each group's multi-tensor step runs alone)."""
    sizes = ((0, 100, 2), (1, 10, 4))  # two ranks: 100 each, then 10s to the lighter ones
    assert rank_loads(sizes, 2) == [[100, 20], [100, 20]]
    state, step = worst_shares(((0, 100, 1), (0, 50, 1), (1, 10, 3)), 2)
    assert rank_loads(((0, 100, 1), (0, 50, 1), (1, 10, 3)), 2) == [[100, 0], [50, 30]]
    assert state == pytest.approx(100 / 180)
    assert step == 1.0  # the second group all on one rank


@pytest.mark.parametrize("text", ["", "precision=bf16,accumulation=2,checkpointing=blocks"])
def test_zero1_read_from_ddps_step_is_the_zero1_step_traced(text: str) -> None:
    """At every micro-batch and rank count, DDP's traced step with its optimizer over the
    largest partition holds what the ZeRO-1 step traced on fake tensors holds: never less, and
    more only by the partition's step counters (a scalar a tensor, counted by element)."""
    plan = parse_plan(text or "accumulation=1")
    ddp = lines_here(MINI, plan, {}, replicas=2, sharding="none", carry=False)
    for ranks in (3, 8):
        traced = lines_here(MINI, plan, {}, replicas=ranks, sharding="optimizer", carry=False)
        derived = zero1_lines(ddp, ranks)
        assert "largest of" in derived.notes[-1]
        for micro in (1, 4, 16):
            want, have = sum(traced.at(micro).values()), sum(derived.at(micro).values())
            assert 0 <= have - want <= 1e-5 * want, (ranks, micro, have, want)
    assert sum(zero1_lines(ddp, 8).at(4).values()) < sum(ddp.at(4).values())


def test_unknown_sizes_read_ddps_step_an_upper_bound() -> None:
    lines = PeakLines(2, 4, (((1, 0, 2, 8, 3, 0, 1), (1, 0, 2, 8, 5, 0, 2)),), 8)
    out = zero1_lines(lines, 8)
    assert out.lines == lines.lines and "upper bound" in out.notes[-1]


def test_a_deep_models_partition_is_carried_as_its_tensors_not_as_a_line() -> None:
    """GPT-3 13B's optimizer tensors carried from its 4- and 6-block models are its 40
    blocks' own, and so is its largest of 8 partitions: 1,625 M elements, where the largest
    partitions of the 4- and 6-block models (257 M and 288 M: the embedding, with little
    beside it) lie on a line that reaches 816 M at 40 blocks (what ZeRO-1 traced at the
    shallow depths and carried held: half the state)."""
    from advisor.probes.operators.layer_scaling import _carried_sizes

    sizes = {n: optimizer_sizes(_optimizer("examples.transformers:gpt3_13", layers=n))
             for n in (4, 6, 40)}  # fmt: skip
    carried = _carried_sizes(sizes[4], sizes[6], (40 - 4) / (6 - 4))
    assert carried == sizes[40]
    worst = {n: max(sum(r) for r in rank_loads(s, 8)) for n, s in sizes.items()}
    assert round(worst[40] / 1e6) == 1625
    line = worst[4] + (worst[6] - worst[4]) * (40 - 4) / 2
    assert line < 0.55 * worst[40]
    assert _carried_sizes(sizes[4], (), 18.0) == ()  # one depth unknown: unknown
    odd = tuple((g, n, c + 1) if n == 5120 else (g, n, c) for g, n, c in sizes[6])
    assert _carried_sizes(sizes[4], odd, 0.5) == ()  # half a tensor: unknown


def test_the_peak_lines_keep_their_sizes_through_a_round_trip() -> None:
    lines = PeakLines(2, 4, (((1,) * 7, (2,) * 7),), 3, ("n",), ((0, 10, 2),))
    assert PeakLines.from_dict(lines.to_dict()) == lines
    with pytest.raises(KeyError):  # an entry kept before sizes: read as unreadable, traced again
        PeakLines.from_dict({k: v for k, v in lines.to_dict().items() if k != "sizes"})
    assert dataclasses.replace(lines, sizes=()).sizes == ()


@pytest.mark.parametrize(
    "workload, text",
    [(MINI, ""), (MINI, "precision=bf16,checkpointing=blocks"), ("fcn", "precision=bf16")],
)
def test_ddps_two_micro_steps_read_from_one_are_the_two_traced(workload: str, text: str) -> None:
    """Under DDP (the gradients held as its buckets) the step of two micro-steps holds what the
    step of one holds, the whole batch and the first loss beside it: read so, never less than
    traced and at most the loss's bytes more, at every micro-batch."""
    plan = parse_plan(text or "accumulation=1")
    one = lines_here(workload, plan, {}, replicas=2, carry=False)
    two = lines_here(workload, dataclasses.replace(plan, accumulation=2), {}, replicas=2,
                     carry=False)  # fmt: skip
    read = two_micro_steps(one)
    for micro in (1, 4, 16, 64):
        want, have = sum(two.at(micro).values()), sum(read.at(micro).values())
        assert 0 <= have - want <= LOSS_BYTES, (micro, have, want)
