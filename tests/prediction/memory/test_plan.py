"""A step's memory under a plan (issues #35, #45): the memory of the step ``advisor.train``
runs under that plan, traced; for a step that cannot be traced here, the float32 step's
memory rewritten by the plan's rules (priors)."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from advisor.probes.operators.peak_lines import envelope
from advisor.probes.operators.plan_peak import peak_lines, trace_plan_peak
from hypothesis import given, settings
from hypothesis import strategies as st
from perf_fixtures import mlp_trace

from advisor.prediction.memo import forget_all
from advisor.prediction.memory.model import StepMemory, step_memory
from advisor.prediction.memory.plan import factor_memory, layout, traced_memory
from advisor.prediction.step.plan import PlanNotRunnable, TrainingPlan, parse_plan

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    forget_all()
    yield
    forget_all()


# -- the traced step: formulas ----------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=40))
def test_the_envelope_keeps_every_moment_that_is_the_peak_at_some_batch(
    moments: list[tuple[int, int]],
) -> None:
    """The upper envelope of the moments' lines (total at micro-batch 2 and 4) gives the same
    peak as all the moments, at every micro-batch."""
    low = tuple((a,) for a, _ in moments)
    high = tuple((b,) for _, b in moments)
    for first, fewest in ((-math.inf, 1), (-1, 1)):  # every batch; from micro-batch 1 on
        kept = envelope(low, high, 2, first)
        assert fewest <= len(kept) <= len(moments)
        for batch in (1, 2, 3, 4, 7, 64, 4096):
            f = (batch - 2) / 2
            every = max(lo[0] + (hi[0] - lo[0]) * f for lo, hi in zip(low, high, strict=True))
            ours = max(lo[0] + (hi[0] - lo[0]) * f for lo, hi in kept)
            assert ours == pytest.approx(every)


def test_the_lines_give_the_traced_peak_at_another_micro_batch() -> None:
    """Two traced micro-batches give the step's peak at any other one: the same figures as
    tracing that micro-batch, holder by holder."""
    for plan in (TrainingPlan(), parse_plan("precision=bf16,accumulation=2")):
        lines = peak_lines("fcn", plan, rules="cpu")
        direct = trace_plan_peak("fcn", 24, plan, rules="cpu").peak
        assert lines.at(24) == pytest.approx(direct)


def test_the_layout_names_what_the_peak_depends_on() -> None:
    assert layout(TrainingPlan(), 1) == "fp32/a1/none/1"
    assert layout(parse_plan("precision=fp16,accumulation=8"), 8) == "half/a2/none/ddp"
    assert layout(parse_plan("precision=bf16"), 1) == layout(parse_plan("precision=fp16"), 1)
    assert layout(parse_plan("sharding=optimizer"), 8) == "fp32/a1/none/zero1x8"
    assert layout(parse_plan("sharding=parameters,checkpointing=blocks"), 4) == (
        "fp32/a1/blocks/parametersx4"
    )


# -- the traced step: what each plan does to the memory ---------------------------------------


def _held(memory: StepMemory, name: str) -> float:
    return sum(t.value for t in memory.terms if t.name == name)


def test_accumulation_holds_the_gradients_beside_a_micro_batchs_activations() -> None:
    """From the second micro-step on, the gradients of the first are live beside the next
    micro-batch's activations: accumulation 2 at 8 samples a GPU holds more than the plain
    step at 4 (the same micro-batch), by the gradients."""
    hp: dict[str, Any] = {}
    plain = traced_memory("examples.transformers:gpt2_mini", hp, 4, TrainingPlan())
    two = traced_memory("examples.transformers:gpt2_mini", hp, 8, parse_plan("accumulation=2"))
    params = _held(plain, "parameters")
    assert _held(two, "gradients") == pytest.approx(params, rel=0.01)
    assert two.bytes > plain.bytes


def test_ddp_holds_its_gradient_buckets_through_the_forward_pass() -> None:
    one = traced_memory("examples.transformers:gpt2_mini", {}, 4, TrainingPlan(), devices=1)
    two = traced_memory("examples.transformers:gpt2_mini", {}, 4, TrainingPlan(), devices=2)
    assert two.bytes > one.bytes
    assert _held(two, "gradients") == pytest.approx(_held(two, "parameters"), rel=0.01)


def test_ddps_other_layouts_are_read_from_its_one_micro_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On several GPUs without FSDP, two and more micro-steps and ZeRO-1 (at any count) read
    DDP's one micro-step (``ddp_lines``): one layout traced for all of them, none on one GPU."""
    from advisor.probes.operators import plan_peak

    traced: list[tuple[int, str]] = []

    def counted(workload, plan, *args, **kw):  # type: ignore[no-untyped-def]
        traced.append((plan.accumulation, kw["sharding"]))
        return peak_lines(workload, plan, *args, **kw)

    monkeypatch.setattr(plan_peak, "peak_lines", counted)
    model = "examples.transformers:gpt2_mini"
    for text in ("", "accumulation=2", "accumulation=8", "sharding=optimizer",
                 "accumulation=4,sharding=optimizer"):  # fmt: skip
        traced_memory(model, {}, 16, parse_plan(text or "accumulation=1"), devices=8)
    assert traced == [(1, "none")]
    two = traced_memory(model, {}, 16, parse_plan("accumulation=2"), devices=8)
    assert "two micro-steps read from one" in two.notes[-1]
    traced_memory(model, {}, 16, parse_plan("accumulation=2"), devices=1)  # one GPU: traced
    assert traced == [(1, "none"), (2, "none")]


def test_zero_shards_what_it_says() -> None:
    """ZeRO-1 keeps the optimizer state of the largest of 8 partitions; ZeRO-3 (FSDP2) the
    parameters' shards and one block gathered at a time."""
    plain = traced_memory("examples.transformers:gpt2_mini", {}, 4, TrainingPlan(), devices=8)
    z1 = traced_memory("examples.transformers:gpt2_mini", {}, 4, parse_plan("sharding=optimizer"),
                       devices=8)  # fmt: skip
    z3 = traced_memory("examples.transformers:gpt2_mini", {}, 4,
                       parse_plan("sharding=parameters"), devices=8)  # fmt: skip
    state = _held(plain, "optimizer_state")
    assert state > 0 and _held(z1, "optimizer_state") < state / 2  # the embedding is one
    assert _held(z3, "parameters") < _held(plain, "parameters") / 4
    assert z3.bytes < z1.bytes <= plain.bytes


def test_checkpointing_is_traced_as_it_is_wrapped() -> None:
    """fcn's blocks are the layers of its one ``nn.Sequential``: wrapping each keeps its input
    and rebuilds it, so the peak rises (the factor rule said it fell to a quarter)."""
    plain = traced_memory("fcn", {}, 128, TrainingPlan())
    ckpt = traced_memory("fcn", {}, 128, parse_plan("checkpointing=blocks"))
    assert ckpt.bytes > plain.bytes


def test_checkpointing_is_not_runnable_where_advisor_train_cannot_wrap() -> None:
    with pytest.raises(PlanNotRunnable, match="checkpointing=blocks needs"):
        traced_memory("trace_user_models:build_data_dependent", {}, 8,
                      parse_plan("checkpointing=blocks"))  # fmt: skip


def _bench(name: str) -> ModuleType:
    """The benchmark module under its own name (the gloo processes it spawns import it by name
    from ``benchmarks/``, which the spawned children inherit on their path)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


@pytest.mark.slow  # about 30 s: four real steps and their traces
@pytest.mark.parametrize(
    "text",
    [
        "",
        "accumulation=4",
        "checkpointing=blocks",
        "precision=bf16,accumulation=2,checkpointing=blocks",
    ],
)
def test_the_traced_memory_is_the_memory_of_the_step_that_runs(text: str) -> None:
    """The product's traced memory of a GPT-2-shaped step under the plan against the
    allocator's measured peak of ``advisor.train``'s real step under it, on this CPU (the
    benchmark's own measurement, ``benchmarks/plan_conformance.py``)."""
    bench = _bench("plan_conformance")
    workload = "examples.transformers:gpt2_mini"
    predicted = bench.predicted(workload, {}, 8, text, 1)
    measured = bench.measured(workload, {}, 8, text, 1)
    assert predicted == pytest.approx(measured, rel=0.02), (text, predicted, measured)


@pytest.mark.slow  # about 15 s: four real steps and their traces
@pytest.mark.parametrize(
    ("workload", "text"),
    [
        ("simple-cnn", ""),
        ("simple-cnn", "precision=bf16,checkpointing=blocks"),
        ("simple-cnn", "precision=fp16"),
        ("fcn", "precision=fp16"),
    ],
)
def test_a_channels_last_convnets_traced_memory_is_the_memory_of_its_step(
    workload: str, text: str
) -> None:
    """A channels-last convnet on this CPU: the trace takes the convolution's output format
    from PyTorch's choice of kernel here, and holds what those kernels allocate beside their
    outputs (max pooling's backward copies, ATen's column buffer where the CPU runs the half
    type without oneDNN): before, the same steps measured 8-37 % above the trace."""
    bench = _bench("plan_conformance")
    predicted = bench.predicted(workload, {}, 32, text, 1)
    measured = bench.measured(workload, {}, 32, text, 1)
    assert predicted == pytest.approx(measured, rel=0.02), (text, predicted, measured)


@pytest.mark.slow  # about 40 s: two gloo processes per plan, and the traces
@pytest.mark.parametrize("text", ["sharding=optimizer", "sharding=parameters,accumulation=2"])
def test_the_traced_sharded_memory_is_the_memory_of_the_step_that_runs(text: str) -> None:
    """ZeRO-1 (DDP's buckets and the largest optimizer partition) and ZeRO-3 (FSDP2) traced,
    against the worst of two real processes over gloo running ``advisor.train``'s setup."""
    bench = _bench("plan_conformance")
    predicted = bench.predicted("fcn", {}, 32, text, 2)
    measured = bench.measured("fcn", {}, 32, text, 2)
    # FSDP's measured peak moves from run to run with when its prefetched all-gathers land
    # (fcn b32 under accumulation: 14.7-16.0 MiB over three runs, the trace 14.6): within 10 %
    rel = 0.10 if "parameters" in text else 0.02
    assert predicted == pytest.approx(measured, rel=rel), (text, predicted, measured)


# -- the rules, for a step that cannot be traced here ------------------------------------------


def _memory() -> StepMemory:
    t = mlp_trace(256)
    p = 4 * t.parameters
    mem = {"parameters": p, "gradients": p, "optimizer_state": p, "activations": 10 * p}
    return step_memory(dataclasses.replace(t, memory_bytes=mem))


def _term(m: StepMemory, name: str) -> float:
    return sum(t.value for t in m.terms if t.name == name)


def test_the_default_plan_changes_nothing() -> None:
    m = _memory()
    assert factor_memory(m, TrainingPlan()) == m


def test_amp_keeps_fp32_master_weights_and_shrinks_the_activations() -> None:
    m = _memory()
    amp = factor_memory(m, TrainingPlan("bf16"))
    for name in ("parameters", "gradients", "optimizer_state"):
        assert _term(amp, name) == _term(m, name)
    assert _term(amp, "activations") < _term(m, "activations")
    assert _term(amp, "autocast_weight_copies") == _term(m, "parameters") / 2
    assert any(t.prior for t in amp.terms if t.name == "activations")


def test_sharding_divides_the_state_by_the_gpus() -> None:
    m = _memory()
    z1 = factor_memory(m, TrainingPlan(sharding="optimizer"), devices=8)
    assert _term(z1, "optimizer_state") == _term(m, "optimizer_state") / 8
    assert _term(z1, "gradients") == _term(m, "gradients")
    z3 = factor_memory(m, TrainingPlan(sharding="parameters"), devices=8)
    assert _term(z3, "parameters") == _term(m, "parameters") / 8
    assert _term(z3, "gathered_unit") > 0
    assert z3.bytes < z1.bytes < m.bytes
    one = factor_memory(m, TrainingPlan(sharding="parameters"), devices=1)
    assert one.bytes == m.bytes


def test_accumulation_by_the_rules_adds_the_gradients_a_forward_peak_lacks() -> None:
    m = _memory()
    forward = dataclasses.replace(m, terms=tuple(t for t in m.terms if t.name != "gradients"))
    acc = factor_memory(forward, TrainingPlan(accumulation=4))
    assert _term(acc, "gradients") == _term(m, "parameters")


def test_checkpointing_by_the_rules_keeps_a_share_of_the_activations() -> None:
    m = _memory()
    ck = factor_memory(m, TrainingPlan(checkpointing="blocks"))
    assert _term(ck, "activations") < _term(m, "activations") / 2
    assert ck.low <= ck.bytes <= ck.high


def test_random_plans_by_the_rules_stay_ordered() -> None:
    rng = random.Random(0)
    m = _memory()
    for _ in range(20):
        plan = TrainingPlan(
            rng.choice(["fp32", "bf16", "fp16"]), rng.choice([1, 2, 8]),
            rng.choice(["none", "blocks"]), rng.choice(["none", "optimizer", "parameters"]),
        )  # fmt: skip
        got = factor_memory(m, plan, devices=rng.choice([1, 8]))
        assert got.low <= got.bytes <= got.high


def test_a_fine_tunes_float32_plan_reads_the_bf16_trace_of_the_same_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A LoRA model's base is bf16 and computes under bf16 autocast whatever the plan: its
    float32 plan is the bf16 plan's step (traced apart, the same terms), read from one trace."""
    from advisor.prediction.memory import plan as plan_memory

    lora = "hf:meta-llama/Llama-3.1-8B,method=lora,layers=1,vocab=512,seq_len=64"
    wide, half = TrainingPlan("fp32", 2), TrainingPlan("bf16", 2)
    apart = [peak_lines(lora, p, {}).at(4) for p in (wide, half)]
    assert apart[0] == apart[1]  # traced apart: the same tensors at the peak

    traced: list[str] = []
    real = plan_memory._lines

    def counted(key: str, *args: Any, **kw: Any) -> Any:
        traced.append(key)
        return real(key, *args, **kw)

    monkeypatch.setattr(plan_memory, "_lines", counted)
    read = [traced_memory(lora, {}, 8, p) for p in (wide, half)]
    assert len(traced) == 1 and "half/a2" in traced[0]
    assert read[0].terms == read[1].terms
    assert sum(t.value for t in read[0].terms) == pytest.approx(sum(apart[0].values()))
    assert "plan: fp32" in read[0].notes[0]  # the row says the plan it runs
