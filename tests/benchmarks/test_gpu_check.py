"""benchmarks/gpu_check.py (issue #14 section 5) without a GPU: its CPU mode end to end, the
no-GPU exit, bad input, and which catalog row a CUDA device name is."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _load("gpu_check")


def test_without_cuda_it_exits_2_with_one_line(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench.main(["--workloads", "fcn", "--batches", "64"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (
        "no GPU here (torch.cuda.is_available() is False); run it on a GPU machine or pass "
        "--device cpu"
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--batches", "0"], "integers > 0"),
        (["--batches", "64,x"], "comma-separated integers"),
        (["--workloads", "fcnn"], "Unknown model 'fcnn'"),
        (["--machine", "p99.nothing"], "p99.nothing"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    bench: ModuleType, capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    pytest.importorskip("torch")
    assert bench.main(["--device", "cpu", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("device_name", "accelerator"),
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("Tesla V100-SXM2-16GB", "V100"),
        ("Tesla V100-PCIE-16GB", "V100-PCIe"),
        ("NVIDIA A10G", "A10G"),
        ("Tesla T4", "T4"),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_a_cuda_device_name_is_the_catalog_accelerator(
    bench: ModuleType, device_name: str, accelerator: str | None
) -> None:
    from advisor.providers import catalog

    case = sys.modules["gpu_check_case"]
    assert case.accelerator_for(device_name, list(catalog.load().accelerators)) == accelerator


def test_the_machine_row_is_one_gpu_of_the_catalog(bench: ModuleType) -> None:
    from advisor.providers import catalog as catalog_mod

    case = sys.modules["gpu_check_case"]
    catalog = catalog_mod.load("2026-11")
    row, why = case.choose_machine(catalog, "cuda", "NVIDIA H100 80GB HBM3", None)
    assert (row.key, row.accelerator, row.accelerator_count) == ("ec2:p5.4xlarge", "H100", 1)
    assert "H100" in why and "ec2:p5.4xlarge" in why
    # no single-H200 row: the 8-GPU machine's one-GPU share, said so
    row, why = case.choose_machine(catalog, "cuda", "NVIDIA H200", None)
    full = catalog.get(row.key.rsplit("/", 1)[0])
    assert row.accelerator == "H200" and row.accelerator_count == 1 and full.accelerator_count == 8
    assert row.on_demand_usd_per_h == pytest.approx(full.on_demand_usd_per_h / 8)
    assert "1 of its 8 GPUs" in why
    row, why = case.choose_machine(catalog, "cuda", "NVIDIA H100 80GB HBM3", "p3.2xlarge")
    assert row.key == "ec2:p3.2xlarge" and why == "--machine p3.2xlarge"
    with pytest.raises(case.CheckError, match="--machine KEY"):
        case.choose_machine(catalog, "cuda", "NVIDIA GeForce RTX 4090", None)
    row, _ = case.choose_machine(catalog, "cpu", "CPU", None)
    assert row.provider == "local"


@pytest.mark.slow
def test_cpu_mode_compares_the_prediction_with_real_measurements(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three real runs (CPU probe, repeat probe, 2-epoch training) of fcn at batch 32: every
    phase has positive predicted and measured seconds and the error is computed from them."""
    pytest.importorskip("torch")
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n", encoding="utf-8")
    argv = ["--device", "cpu", "--workloads", "fcn", "--batches", "32", "--train-steps", "4",
            "--probe-iterations", "4", "--json", "--write-docs", "--docs", str(docs)]  # fmt: skip
    assert bench.main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["device"] == "cpu" and doc["machine"] == "local:local" and doc["skipped"] == []
    (res,) = doc["results"]
    assert res["status"] == "ok", res
    assert "probe_failure" not in res and "training_failure" not in res
    run = res["training_run"]
    assert run["n_train"] == 32 * 4 and run["n_val"] == 212 and run["steps"] == 2 * 4
    assert res["prediction"]["kind"] == "measured"  # local: the CPU probe's own phases
    phases = {r["phase"]: r for r in res["phases"]}
    assert list(phases) == [
        "init", "first iteration", "steady iteration", "validation, 1st pass",
        "validation, later pass", "run total",
    ]  # fmt: skip
    for name, r in phases.items():
        p, t = r["predicted"], r["training"]
        assert 0 < p["low"] <= p["value"] <= p["high"], name
        assert t is not None and t > 0, name
        assert r["error_pct"] == pytest.approx(100 * (p["value"] - t) / t), name
        assert r["in_interval"] == (p["low"] <= t <= p["high"]), name
        if name != "run total":
            assert r["probe"] > 0, name
            assert r["error_pct_probe"] == pytest.approx(
                100 * (p["value"] - r["probe"]) / r["probe"]
            )
    # three separate runs: the prediction, the repeat probe and the training differ
    t2 = phases["steady iteration"]
    assert len({t2["predicted"]["value"], t2["probe"], t2["training"]}) == 3
    assert phases["run total"]["training"] == run["total_s"] > phases["init"]["training"]
    for row in doc["summary"]:
        assert row["cases"] == 1
        assert math.isclose(row["median_abs_error_pct"], abs(phases[row["phase"]]["error_pct"]))
    text = docs.read_text(encoding="utf-8")
    assert text.startswith("# Benchmarks\n\n## GPU check, ")
    assert "No GPU was available" in text and "--device cpu --workloads fcn" in text
    assert "| steady iteration |" in text and "**fcn, batch 32**" in text
    # issue #26: the profiled step per phase and operator kind, against the kernel model on
    # --ops-gpu (T4); on the CPU the times are CPU times and no GPU kernel is launched
    ops = res["operators"]
    assert ops["gpu"] == "T4" and ops["device"] == "cpu" and ops["kernels_per_step"]["traced"] > 0
    measured = {(r["phase"], r["class"]): r["measured_s"] for r in ops["rows"]}
    assert measured[("forward", "conv")] > 0 and measured[("backward", "conv")] > 0
    assert "Per operator kind, measured CPU time" in text


def test_totals_take_the_median_error_and_count_the_hits(bench: ModuleType) -> None:
    def case(err: float | None, inside: bool | None) -> dict[str, object]:
        rows = [{"phase": label, "error_pct": err, "in_interval": inside}
                for _, label in bench.PHASES]  # fmt: skip
        return {"phases": [*rows, {"phase": "run total", "error_pct": None, "in_interval": None}]}

    rows = bench.summary([case(-30.0, False), case(10.0, True), case(20.0, True), {"phases": []}])
    steady = next(r for r in rows if r["phase"] == "steady iteration")
    assert steady == {"phase": "steady iteration", "cases": 3, "median_abs_error_pct": 20.0,
                      "in_interval": 2}  # fmt: skip
    total = next(r for r in rows if r["phase"] == "run total")
    assert total["cases"] == 0 and total["median_abs_error_pct"] is None
    assert "| steady iteration | 3 | 20 % | 2 |" in bench.totals(rows)


@pytest.mark.slow
def test_cpu_mode_memory_compares_the_model_with_the_allocators_peak(bench: ModuleType) -> None:
    """Issue #34's comparison on the CPU: the model's tensor peak of fcn beside the profiler's
    measured allocated peak; the GPU-only figures stay empty, and the case's line says it."""
    pytest.importorskip("torch")
    mem = sys.modules["gpu_check_memory"].memory_case("fcn", 16, "cpu", None)
    assert mem["measured_allocated_mib"] > 1 and mem["predicted_tensors_mib"] > 1
    assert mem["error_allocated"] == pytest.approx(
        mem["predicted_tensors_mib"] / mem["measured_allocated_mib"] - 1
    )
    assert abs(mem["error_allocated"]) < 0.25  # fcn: no kernel-private buffers on the CPU
    assert mem["measured_reserved_mib"] is None and mem["predicted_gpu_mib"] is None
    text = sys.modules["gpu_check_memory"].line(mem)
    assert text.startswith("memory: predicted tensors") and "reserved" not in text
