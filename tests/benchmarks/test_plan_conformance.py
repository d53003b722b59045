"""`benchmarks/plan_conformance.py --rescore`: measured rows kept from a GPU scored by the model
as it is now, without the GPU (issue #45)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_paths import load_benchmark


def test_a_gpu_row_is_rescored_with_cublas_workspaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same step measured on an H200 and on the CPU: on the GPU the prediction holds the
    cuBLAS workspaces (65 MiB on Hopper: the step multiplies matrices), on the CPU not; the
    errors are the rows' own measurements against those predictions."""
    bench = load_benchmark("plan_conformance")
    case = {"workload": "examples.my_torch_model:build", "batch": 64, "plan": "fp32",
            "processes": 1}  # fmt: skip
    rows = [{**case, "device": "cuda", "measured_mib": 66.0},
            {**case, "device": "cpu", "measured_mib": 1.0}]  # fmt: skip
    kept, out = tmp_path / "rows.json", tmp_path / "scored.json"
    kept.write_text(json.dumps(rows))
    args = ["--rescore", str(kept), "--gpu", "NVIDIA H200,Hopper", "--json", str(out)]
    assert bench.main(args) == 0
    gpu, cpu = json.loads(out.read_text())
    assert gpu["generation"] == "Hopper" and "generation" not in cpu
    assert gpu["predicted_mib"] - cpu["predicted_mib"] == pytest.approx(65.0, abs=0.5)
    for r in (gpu, cpu):
        assert r["error"] == pytest.approx(r["predicted_mib"] / r["measured_mib"] - 1)
        assert r["upper_mib"] >= r["predicted_mib"]
    assert "one NVIDIA H200" in capsys.readouterr().out
