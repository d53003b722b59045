"""``--precision`` through ``advisor.predict`` and the suggest back end (issue #35): GPUs
without it left out with the reason, the others predicted under the plan."""

from __future__ import annotations

from typing import Any

import pytest
from advisor.providers.catalog import load
from perf_fixtures import probe, with_synthetic_trace

from advisor.errors import AdvisorError
from advisor.evaluation.predict_api import predict
from advisor.prediction.memo import forget_all
from advisor.prediction.step.machine_plan import machine_plan

MACHINES = ["g4dn.xlarge", "p3.2xlarge", "g5.xlarge", "p5.4xlarge"]


@pytest.fixture(autouse=True)
def _fresh() -> None:

    forget_all()


def _run(precision: str | None) -> tuple[dict[str, float], Any]:
    p = with_synthetic_trace(probe(batch=2048), width=4096)
    out = predict("fcn", 2048, MACHINES, probe=p, precision=precision, epochs=1)
    return {f.machine.accelerator: f.prediction.breakdown["device"] for f in out.rows}, out


def test_bf16_leaves_out_the_gpus_without_it_and_says_why() -> None:
    _, out = _run("bf16")
    assert {f.machine.accelerator for f in out.rows} == {"A10G", "H100"}
    left = [n for n in out.notes if n.startswith("Left out")]
    assert len(left) == 2 and all("compute capability" in n for n in left)
    assert {f.prediction.plan for f in out.rows} == {"bf16"}


def test_mixed_precision_is_faster_on_tensor_cores_in_the_published_order() -> None:
    fp32, _ = _run("fp32")
    auto, _ = _run("auto")
    for gpu in fp32:
        assert auto[gpu] < fp32[gpu], gpu
    assert auto["H100"] < auto["A10G"] < auto["T4"]
    assert auto["V100"] < auto["T4"]


def test_an_unknown_precision_is_one_line() -> None:
    with pytest.raises(AdvisorError, match="Unknown precision 'half'"):
        predict("fcn", 64, MACHINES, probe=probe(batch=64), precision="half")


def test_the_suggest_back_end_leaves_out_a_gpu_without_the_precision() -> None:
    cat = load()
    plan, why = machine_plan(cat.resolve("g4dn.xlarge"), cat, "bf16")
    assert "T4" in why
    plan, why = machine_plan(cat.resolve("g5.xlarge"), cat, "auto")
    assert why == "" and plan is not None and plan.precision == "bf16"
    assert machine_plan(cat.resolve("g5.xlarge"), cat, "fp32") == (None, "")


def test_the_one_prediction_path_refuses_a_gpu_without_the_precision() -> None:
    from advisor.prediction.forecast.forecast import forecast_machine
    from advisor.prediction.step.plan import PrecisionLacking

    cat = load()
    p = with_synthetic_trace(probe(batch=256))
    with pytest.raises(PrecisionLacking, match="left out: T4"):
        forecast_machine(p, cat.resolve("g4dn.xlarge"), cat, 256, 1, 1000, 0, precision="bf16")
    row = forecast_machine(p, cat.resolve("g5.xlarge"), cat, 256, 1, 1000, 0, precision="auto")
    assert row.prediction.plan == "bf16"
    assert isinstance(PrecisionLacking("x"), ValueError)  # the suggest back end's failed trial


def test_the_default_is_auto_and_every_row_names_its_plan() -> None:
    """``advisor.predict`` without ``precision``: each GPU at its best (bf16, fp16 with loss
    scaling, fp32 on a K80), the CPU in float32 as probed, each row's plan in words."""
    from advisor.cli.predict import row_plan

    p = with_synthetic_trace(probe(batch=2048), width=4096)
    out = predict("fcn", 2048, [*MACHINES, "p2.xlarge", "local"], probe=p, epochs=1)
    words = {f.machine.accelerator or "cpu": row_plan(f) for f in out.rows}
    assert words == {"T4": "fp16 with loss scaling", "V100": "fp16 with loss scaling",
                     "A10G": "bf16", "H100": "bf16", "K80": "fp32",
                     "cpu": "fp32 (CPU, as probed)"}  # fmt: skip
