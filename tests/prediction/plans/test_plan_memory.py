"""A step's memory under a plan (issue #35): master weights stay fp32 under AMP, sharded
state divided by the GPUs, checkpointing keeps a share of the activations."""

from __future__ import annotations

from perf_fixtures import mlp_trace

from advisor.prediction.memory import StepMemory, step_memory
from advisor.prediction.plan import TrainingPlan
from advisor.prediction.plan_memory import plan_memory


def _memory() -> StepMemory:
    import dataclasses

    t = mlp_trace(256)
    p = 4 * t.parameters
    mem = {"parameters": p, "gradients": p, "optimizer_state": p, "activations": 10 * p}
    return step_memory(dataclasses.replace(t, memory_bytes=mem))


def _term(m: StepMemory, name: str) -> float:
    return sum(t.value for t in m.terms if t.name == name)


def test_the_default_plan_changes_nothing() -> None:
    m = _memory()
    assert plan_memory(m, TrainingPlan()) == m


def test_amp_keeps_fp32_master_weights_and_shrinks_the_activations() -> None:
    m = _memory()
    amp = plan_memory(m, TrainingPlan("bf16"))
    for name in ("parameters", "gradients", "optimizer_state"):
        assert _term(amp, name) == _term(m, name)
    assert _term(amp, "activations") < _term(m, "activations")
    assert _term(amp, "autocast_weight_copies") == _term(m, "parameters") / 2
    assert any(t.prior for t in amp.terms if t.name == "activations")


def test_sharding_divides_the_state_by_the_gpus() -> None:
    m = _memory()
    z1 = plan_memory(m, TrainingPlan(sharding="optimizer"), devices=8)
    assert _term(z1, "optimizer_state") == _term(m, "optimizer_state") / 8
    assert _term(z1, "gradients") == _term(m, "gradients")
    z3 = plan_memory(m, TrainingPlan(sharding="parameters"), devices=8)
    assert _term(z3, "parameters") == _term(m, "parameters") / 8
    assert _term(z3, "gathered_unit") > 0
    assert z3.bytes < z1.bytes < m.bytes
    one = plan_memory(m, TrainingPlan(sharding="parameters"), devices=1)
    assert one.bytes == m.bytes


def test_checkpointing_keeps_a_share_of_the_activations() -> None:
    m = _memory()
    ck = plan_memory(m, TrainingPlan(checkpointing="blocks"))
    assert _term(ck, "activations") < _term(m, "activations") / 2
    assert ck.low <= ck.bytes <= ck.high
