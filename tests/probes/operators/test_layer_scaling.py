"""Issue #46: a builder that declares its depth (``blocks``, ``layers=``) has its plan memory
and its operator trace carried from traces of 4 and 6 blocks; the carried peak is the whole
trace's, and so are the carried kernels."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from advisor.probes.operators.layer_scaling import declared_depth, scaled_declared_trace
from advisor.probes.operators.peak_lines import TRACED_BATCHES, PeakLines, envelope
from advisor.probes.operators.plan_peak import lines_here, trace_plan_peak

from advisor.prediction.step.plan import parse_plan

DEEP = "trace_user_models:deep_mini"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _repo_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/ found from the repository root, as the isolated worker finds it."""
    monkeypatch.syspath_prepend(str(ROOT))


def test_only_a_deep_declared_builder_is_carried() -> None:
    assert declared_depth(DEEP, {}) == 8
    assert declared_depth(DEEP, {"layers": 8}) is None  # fixed by the user: traced whole
    assert declared_depth("examples.transformers:gpt2_mini", {}) is None  # declares nothing
    assert declared_depth("examples.transformers:gpt2_large", None) == 36
    assert declared_depth("fcn", {}) is None


def test_the_carried_operator_trace_is_the_whole_traces() -> None:
    """The step's kernels at 8 blocks carried from 4 and 6 (``trace_torch_workload`` does so
    for any declared builder): every kernel's call count is the whole trace's, the optimizer's
    multi-tensor kernels carry its FLOPs and bytes, the parameters are counted exactly."""
    from advisor.probes.operators.torch_workload import trace_on_meta, trace_torch_workload

    carried = scaled_declared_trace(DEEP, {}, lambda hps: trace_on_meta(DEEP, 4, hps))
    whole = trace_on_meta(DEEP, 4, {"layers": 8})
    assert carried is not None and "8 blocks carried" in carried.notes[-1]
    assert carried.parameters == whole.parameters

    def kernels(trace: Any) -> list[Any]:
        return sorted((o.key, o.count) for o in trace.operators if o.phase != "optimizer")

    def optimizer(trace: Any, what: str) -> float:
        return sum(getattr(o, what) * o.count for o in trace.operators if o.phase == "optimizer")

    assert kernels(carried) == kernels(whole)
    for what in ("flops", "bytes"):
        assert optimizer(carried, what) == pytest.approx(optimizer(whole, what), rel=1e-6)
    assert trace_torch_workload(DEEP, 4).operators == carried.operators  # the public path


@pytest.mark.slow  # about 90 s: each plan traced whole and at 4 and 6 blocks
@pytest.mark.parametrize(
    "text, replicas",
    [
        ("", 1),
        ("checkpointing=blocks", 1),
        ("precision=bf16,accumulation=2", 1),
        ("precision=bf16,checkpointing=blocks", 1),
        ("precision=bf16,sharding=parameters", 4),
    ],
)
def test_the_carried_peak_is_the_whole_traces(text: str, replicas: int) -> None:
    """Carried kind of moment by kind (bf16 under accumulation keeps a third moment from 6
    blocks on, FSDP one per block: each kind's envelope keeps them at 4 blocks too), the
    carried peak is the whole trace's at every micro-batch: never 1 % below it (the dangerous
    side), at most 3 % above (FSDP's near-equal moments within a block, paired in order)."""
    plan = parse_plan(text)
    kw = {"replicas": replicas, "sharding": plan.sharding}
    low, high = TRACED_BATCHES
    a, b = (trace_plan_peak(DEEP, m, plan, {"layers": 8}, **kw) for m in (low, high))
    whole = PeakLines(low, high, envelope(a.timeline, b.timeline, high - low, 1 - low), a.state)
    got = lines_here(DEEP, plan, {}, **kw)
    assert any("carried" in n for n in got.notes), got.notes
    for micro in (1, 4, 16):
        want, have = sum(whole.at(micro).values()), sum(got.at(micro).values())
        assert -0.01 < have / want - 1 < 0.03, (text, micro, have, want)


@pytest.fixture
def two_workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The isolated workers as on a machine of two CPUs (both slots), shut down after."""
    from advisor.probes import isolated

    monkeypatch.setattr(isolated, "slots", lambda: 2)
    try:
        yield isolated
    finally:
        isolated.shutdown()


@pytest.mark.slow  # two worker processes with PyTorch imported
def test_a_users_declared_builder_is_traced_at_two_depths_side_by_side(two_workers: Any) -> None:
    """A user's builder runs in the isolated workers only (issue #50): its depth is read
    there, and its two shallow traces (plan memory, operator trace) run side by side in two
    workers; what comes back is what the traces in one process give."""
    from advisor.probes.operators.plan_peak import peak_lines
    from advisor.probes.operators.torch_workload import trace_torch_workload
    from advisor.probes.operators.workload import trace_workload

    plan = parse_plan("precision=bf16,checkpointing=blocks")
    apart = peak_lines(DEEP, plan)
    assert len(two_workers._WORKERS) == 2  # both slots used
    here = lines_here(DEEP, plan)
    assert apart.lines == here.lines and apart.state == here.state
    assert "8 blocks carried" in apart.notes[-1]
    traced = trace_workload(DEEP, 4)
    assert traced.operators == trace_torch_workload(DEEP, 4).operators  # in one process


@pytest.mark.slow  # two worker processes with PyTorch imported
def test_an_hf_models_shallow_traces_run_side_by_side(two_workers: Any) -> None:
    """Issue #46: an ``hf:`` model's 2- and 4-block traces under a plan run side by side in two
    workers; the carried lines are those of the traces in one process."""
    from advisor.probes.operators.plan_peak import peak_lines

    tiny = ROOT / "tests" / "search_spaces" / "hf" / "tiny_llama.json"
    model = f"hf:{tiny},layers=8,seq_len=64,method=lora"
    plan = parse_plan("precision=bf16")
    apart = peak_lines(model, plan)
    assert len(two_workers._WORKERS) == 2  # both slots used
    here = lines_here(model, plan)
    assert apart.lines == here.lines and apart.state == here.state
    assert "8 blocks carried" in apart.notes[-1]


def test_the_four_shallow_steps_are_shared_crosswise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #46: each worker traces one depth's smaller micro-batch and the other depth's
    larger (a trace's time grows with its blocks, not its batch), the same worker the same
    (depth, micro-batch) every time; the lines come out per depth, in order."""
    from advisor.probes import isolated
    from advisor.probes.operators import plan_peak

    low, high = TRACED_BATCHES
    by_worker: dict[int, list[tuple[int, int]]] = {0: [], 1: []}

    def each(calls: list[Any], **_: Any) -> list[Any]:
        out = []
        for i, (fn, (_, m, _plan, hps), kw) in enumerate(calls):
            assert fn is plan_peak.step_peak and kw == {"replicas": 1}
            by_worker[i % 2].append((hps["layers"], m))
            rows = ((m * hps["layers"], 1), (m, 2))  # bytes by holder after each op
            out.append(plan_peak.PlanPeak(rows, state=hps["layers"]))
        return out

    monkeypatch.setattr(isolated, "call_isolated_each", each)
    models = [(DEEP, {"layers": 4}), (DEEP, {"layers": 6})]
    got = plan_peak.crosswise(models, object(), {"replicas": 1}, "test")
    assert sorted(by_worker[0]) == [(4, low), (6, high)]
    assert sorted(by_worker[1]) == [(4, high), (6, low)]
    assert [g.state for g in got] == [4, 6]
    for g, depth in zip(got, (4, 6), strict=True):
        a = plan_peak.PlanPeak(((low * depth, 1), (low, 2)), depth)
        b = plan_peak.PlanPeak(((high * depth, 1), (high, 2)), depth)
        assert g.lines == plan_peak.lines_of(a, b).lines


def test_a_declared_builder_whose_4_and_6_blocks_do_not_correspond_is_carried_from_6_and_8() -> (
    None
):
    """GPT-2 Large under bf16 with checkpointed blocks keeps two moments of one kind on its
    upper envelope from 6 blocks on and one at 4 (stop 64): its 4- and 6-block traces do not
    correspond, so the 6-block trace is kept and one of 8 blocks added, and 6 and 8 carry to
    its 36 (not the whole model traced: 10-16 s a layout). Here each depth's lines are made:
    per block 10 bytes of activations a sample at one moment, and from 6 blocks a second
    moment of the same kind with 40 fixed bytes a block more and none a sample."""
    from advisor.probes.operators.layer_scaling import scaled_declared_lines

    asked: list[int] = []

    def trace(hps: dict[str, Any]) -> PeakLines:
        n = hps["layers"]
        asked.append(n)
        lo, hi = TRACED_BATCHES
        one = ((n, 0, 0, 0, 10 * n * lo, 0, 1), (n, 0, 0, 0, 10 * n * hi, 0, 1))
        two = ((n, 0, 0, 0, 40 * n, 0, 1), (n, 0, 0, 0, 40 * n, 0, 1))
        return PeakLines(lo, hi, (one, two) if n >= 6 else (one,), 0)

    got = scaled_declared_lines("examples.transformers:gpt2_large", {}, trace)
    assert asked == [4, 6, 8]
    assert got is not None and "carried from traces of 6 and 8 blocks" in got.notes[-1]
    assert got.lines == trace({"layers": 36}).lines


def test_an_hf_model_is_carried_along_deeper_pairs_until_two_correspond() -> None:
    """Llama 3.1 8B under full fine-tuning, float32 and FSDP without checkpointing keeps two
    moments of one kind at 2 and 4 blocks and one from 6 on (stop 65): neither 2 and 4 nor 4
    and 6 correspond, so an 8-block trace is added and 6 and 8 carry to its 32 blocks (the
    whole model took 15-22 s a layout). Fake lines, per block 10 bytes of activations a sample
    at one moment and a moment of that kind with 40 fixed bytes a block twice at 2 blocks, once
    at 4, never from 6 on; the traces asked for are each depth once, in order."""
    from advisor.probes.operators.layer_scaling import scaled_lines

    asked: list[int] = []

    def trace(workload: str) -> PeakLines:
        n = int(workload.split("layers=")[1].split(",")[0])
        asked.append(n)
        lo, hi = TRACED_BATCHES
        one = ((n, 0, 0, 0, 10 * n * lo, 0, 1), (n, 0, 0, 0, 10 * n * hi, 0, 1))
        two = ((n, 0, 0, 0, 40 * n, 0, 1), (n, 0, 0, 0, 40 * n, 0, 1))
        return PeakLines(lo, hi, (one,) if n >= 6 else (one, two) if n == 4 else (one, two, two), 0)

    got = scaled_lines("hf:meta-llama/Llama-3.1-8B,method=full", trace)
    assert asked == [2, 4, 6, 8]
    assert got is not None and "carried from traces of 6 and 8 blocks" in got.notes[-1]
    assert got.lines == trace("hf:meta-llama/Llama-3.1-8B,method=full,layers=32").lines


def test_a_users_builder_is_carried_from_6_and_8_blocks_traced_side_by_side(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same through the isolated workers (``peak_lines``: a ``module:function`` builder):
    the 4- and 6-block steps crosswise, then the 8-block step's two micro-batches side by
    side, carried from 6 and 8."""
    from advisor.probes import isolated
    from advisor.probes.operators import plan_peak

    asked: list[tuple[int, int]] = []

    def each(calls: list[Any], **_: Any) -> list[Any]:
        out = []
        for fn, (_, m, _plan, hps), _kw in calls:
            assert fn is plan_peak.step_peak
            n = hps["layers"]
            asked.append((n, m))
            rows = [(n, 0, 0, 0, 10 * n * m, 0, 1)] + (
                [(n, 0, 0, 0, 40 * n, 0, 1)] if n >= 6 else []
            )
            out.append(plan_peak.PlanPeak(tuple(rows), state=0))
        return out

    monkeypatch.setattr(isolated, "call_isolated_each", each)
    got = plan_peak.peak_lines("examples.transformers:gpt2_large", parse_plan("precision=bf16"))
    assert sorted({n for n, _ in asked}) == [4, 6, 8]
    assert "carried from traces of 6 and 8 blocks" in got.notes[-1]
    assert got.at(32) == {"parameters": 36, "activations": 360 * 32, "batch": 1}
    assert got.at(1) == {"parameters": 36, "activations": 40 * 36, "batch": 1}  # the other one
