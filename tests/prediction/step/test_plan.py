"""The training plan value (issue #35): validation, words, and which GPUs lack a precision."""

from __future__ import annotations

import pytest
from advisor.providers.catalog import load

from advisor.errors import AdvisorError
from advisor.prediction.step.machine_plan import auto_precision, lacks, machine_plans, plan_on
from advisor.prediction.step.plan import TrainingPlan, check_precision, parse_plan

CAT = load()


def spec(name: str):  # type: ignore[no-untyped-def]
    return CAT.accelerator(name)


def test_the_plan_in_words() -> None:
    plan = TrainingPlan("bf16", 8, "blocks")
    assert plan.words(32) == "bf16, micro-batch 4 x 8 accumulation steps, checkpointed blocks"
    assert TrainingPlan().words() == "fp32"
    assert "ZeRO-3 / FSDP" in TrainingPlan("fp16", sharding="parameters").words()
    assert TrainingPlan("fp16").words() == "fp16 with loss scaling"


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"precision": "fp8"}, "fp32"),
        ({"checkpointing": "layers"}, "blocks"),
        ({"sharding": "zero3"}, "parameters"),
        ({"accumulation": 0}, ">= 1"),
    ],
)
def test_an_unknown_value_is_one_line_naming_the_choices(kwargs: dict, says: str) -> None:
    with pytest.raises(AdvisorError) as err:
        TrainingPlan(**kwargs)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_plan_that_contradicts_itself_is_an_error() -> None:
    with pytest.raises(AdvisorError, match="only 4 samples"):
        TrainingPlan(accumulation=8).micro_batch(4)
    with pytest.raises(AdvisorError, match="one process per GPU"):
        TrainingPlan(sharding="optimizer").check(8, "torch", "dp")
    with pytest.raises(AdvisorError, match="Keras"):
        TrainingPlan(checkpointing="blocks").check(1, "keras")
    with pytest.raises(AdvisorError, match="Unknown precision"):
        check_precision("half")


def test_parse_plan_text() -> None:
    plan = parse_plan("accumulation=8, checkpointing=blocks,sharding=parameters", "bf16")
    assert plan == TrainingPlan("bf16", 8, "blocks", "parameters")
    with pytest.raises(AdvisorError, match="Unknown plan field"):
        parse_plan("accumulate_steps=2")
    with pytest.raises(AdvisorError, match="field=value"):
        parse_plan("bf16")
    assert TrainingPlan.from_dict(plan.to_dict()) == plan


@pytest.mark.parametrize(
    ("gpu", "precision", "lacking"),
    [
        ("T4", "bf16", True), ("V100", "bf16", True), ("K80", "bf16", True),
        ("V100", "tf32", True), ("K80", "fp16", True), ("T4", "fp16", False),
        ("A100-40GB", "bf16", False), ("A10G", "tf32", False), ("H100", "bf16", False),
        ("K80", "fp32", False),
    ],
)  # fmt: skip
def test_a_precision_the_gpu_lacks(gpu: str, precision: str, lacking: bool) -> None:
    assert bool(lacks(spec(gpu), precision)) == lacking


def test_the_reason_names_the_compute_capability() -> None:
    why = lacks(spec("T4"), "bf16")
    assert "7.5" in why and "8.0" in why and "T4" in why


def test_auto_takes_bf16_else_fp16_else_fp32() -> None:
    assert auto_precision(spec("A100-40GB")) == "bf16"
    assert auto_precision(spec("V100")) == "fp16"
    assert auto_precision(spec("K80")) == "fp32"
    plan, why = plan_on(TrainingPlan(accumulation=2), "auto", spec("T4"))
    assert plan == TrainingPlan("fp16", 2) and why == ""


def test_machine_plans_leave_out_gpus_without_the_precision() -> None:
    machines = [CAT.resolve(k) for k in ("g4dn.xlarge", "g5.xlarge", "p5.4xlarge")]
    plans, left_out = machine_plans(machines, CAT, None, "bf16")
    assert set(left_out) == {machines[0].key}
    assert {p.precision for p in plans.values()} == {"bf16"}


def test_replicate_across_machines_is_part_of_the_plan_and_leaves_one_machine_plans_alone() -> None:
    """Issue #49: ``replicate=nodes`` (HSDP) round-trips through ``--plan`` text and dicts; a
    plan without it keeps the text, key and dict it had before."""
    hsdp = parse_plan("sharding=parameters,replicate=nodes")
    assert hsdp.replicate == "nodes" and parse_plan(hsdp.arg()) == hsdp
    assert TrainingPlan.from_dict(hsdp.to_dict()) == hsdp
    assert hsdp.key().endswith("/replicate-nodes") and "HSDP" in hsdp.words()
    plain = parse_plan("sharding=parameters")
    assert "replicate" not in plain.arg() + plain.key() and "replicate" not in plain.to_dict()
