"""A step under a training plan (issue #35): the trace rewritten by autocast's rules, the
accumulation, the recomputation and the sharded update, and the step's device time."""

from __future__ import annotations

import pytest
from advisor.providers.catalog import load
from perf_fixtures import SyntheticTraces, gpu_machine, mlp_trace, traced_probe

from advisor.errors import AdvisorError
from advisor.prediction.memo import forget_all
from advisor.prediction.step.plan import TrainingPlan
from advisor.prediction.step.rewrite import plan_trace
from advisor.prediction.timing.model import predict

CAT = load()


@pytest.fixture(autouse=True)
def _fresh() -> None:

    forget_all()


def _kinds(trace, phase: str, kind: str):  # type: ignore[no-untyped-def]
    return [o for o in trace.operators if o.phase == phase and o.kind == kind]


def test_mixed_precision_halves_the_products_and_keeps_the_optimizer_fp32() -> None:
    base = mlp_trace(256)
    bf16 = plan_trace(base, TrainingPlan("bf16"))
    for phase in ("forward", "backward"):
        for before, after in zip(_kinds(base, phase, "linear"), _kinds(bf16, phase, "linear"),
                                 strict=True):  # fmt: skip
            assert after.dtype == "bfloat16" and after.bytes == before.bytes / 2
            assert after.flops == before.flops
    assert {o.dtype for o in _kinds(bf16, "optimizer", "optimizer")} == {"float32"}
    casts = [o for o in bf16.operators if o.op == "autocast cast"]
    assert {o.phase for o in casts} == {"forward", "backward"}


def test_fp16_adds_the_loss_scalers_pass() -> None:
    fp16 = plan_trace(mlp_trace(256), TrainingPlan("fp16"))
    assert any("unscale" in o.name for o in fp16.operators)
    assert not any("unscale" in o.name for o in plan_trace(mlp_trace(256),
                                                           TrainingPlan("bf16")).operators)  # fmt: skip


def test_accumulation_repeats_forward_and_backward_not_the_optimizer() -> None:
    base = mlp_trace(64)
    acc = plan_trace(base, TrainingPlan(accumulation=4))
    by = {p: sum(o.count for o in base.operators if o.phase == p) for p in ("forward",
                                                                             "optimizer")}  # fmt: skip
    assert sum(o.count for o in acc.operators if o.phase == "forward") == 4 * by["forward"]
    assert sum(o.count for o in acc.operators if o.phase == "optimizer") == by["optimizer"]
    assert any(o.op == "accumulate gradient" and o.count == 3 for o in acc.operators)


def test_checkpointing_runs_the_forward_again_in_backward() -> None:
    base = mlp_trace(64)
    ck = plan_trace(base, TrainingPlan(checkpointing="blocks"))
    fwd = sum(o.flops * o.count for o in base.operators if o.phase == "forward")
    bwd = sum(o.flops * o.count for o in base.operators if o.phase == "backward")
    assert sum(o.flops * o.count for o in ck.operators if o.phase == "backward") == bwd + fwd


def test_sharding_divides_the_update_by_the_gpus() -> None:
    base = mlp_trace(64)
    sharded = plan_trace(base, TrainingPlan(sharding="optimizer"), devices=8)
    before = sum(o.bytes for o in _kinds(base, "optimizer", "optimizer"))
    assert sum(o.bytes for o in _kinds(sharded, "optimizer", "optimizer")) == before / 8


def _device(plan: TrainingPlan | None, accel: str, batch: int = 1024) -> float:
    m = gpu_machine("x", accel, 1, 1.0)
    p = traced_probe(batch=batch, width=4096)
    pred = predict(p, m, CAT, batch, trace_store=SyntheticTraces(width=4096), plan=plan)
    return pred.breakdown["device"]


@pytest.mark.parametrize("accel", ["A100-40GB", "H100", "A10G"])
def test_tensor_cores_make_a_product_bound_step_faster(accel: str) -> None:
    fp32, tf32, bf16 = (_device(TrainingPlan(p), accel) for p in ("fp32", "tf32", "bf16"))
    assert bf16 < tf32 < fp32


def test_accumulation_and_checkpointing_cost_time() -> None:
    plain = _device(TrainingPlan("bf16"), "A100-40GB")
    assert _device(TrainingPlan("bf16", checkpointing="blocks"), "A100-40GB") > plain
    assert _device(TrainingPlan("bf16", accumulation=8), "A100-40GB") > plain


def test_the_prediction_names_its_plan() -> None:
    m = gpu_machine("x", "A100-40GB", 1, 1.0)
    p = traced_probe(batch=64)
    plan = TrainingPlan("bf16", 4, "blocks")
    pred = predict(p, m, CAT, 64, trace_store=SyntheticTraces(), plan=plan)
    assert pred.plan == "bf16, micro-batch 16 x 4 accumulation steps, checkpointed blocks"
    with pytest.raises(AdvisorError, match="only 64 samples"):
        predict(p, m, CAT, 64, trace_store=SyntheticTraces(), plan=TrainingPlan(accumulation=128))
