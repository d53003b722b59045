"""benchmarks/cross_gpu.py: the straggler fit recovers a known coefficient through the
product's model, and the data set is read right."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from perf_fixtures import mlp_trace

from advisor.prediction.step.traces import StepTrace

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "cross_gpu.py"
_spec = importlib.util.spec_from_file_location("_bench_cross_gpu", BENCH)
assert _spec and _spec.loader
cross_gpu = importlib.util.module_from_spec(_spec)
sys.modules["_bench_cross_gpu"] = cross_gpu
_spec.loader.exec_module(cross_gpu)


def synthetic(batch: int) -> StepTrace:
    """A large MLP step (device-bound on an A100), so the multi-GPU terms show."""
    return StepTrace(mlp_trace(batch, width=4096, layers=8), batch, "synthetic")


def test_straggler_fit_predicts_a_row_it_did_not_see() -> None:
    # Rows made at STRAGGLER_CV = 0.04 with +-2 % measurement noise; the fit sees 2 and 4 GPUs
    # only, and its coefficient must predict the 8-GPU row it never saw.
    specs, steps = cross_gpu.Specs(), cross_gpu.Steps(synthetic)
    one = cross_gpu.Row("A100", "A100-80GB", 1, 1000.0, 256)

    def row(n: int, noise: float) -> cross_gpu.Row:
        probe = cross_gpu.Row(f"{n}x", "A100-80GB", n, 1.0, 256)
        thr = cross_gpu.scaling_prediction(steps, specs, probe, one, 0.04) * (1 + noise)
        return cross_gpu.Row(f"{n}x", "A100-80GB", n, thr, 256)

    seen = [(row(2, 0.02), one), (row(4, -0.02), one)]
    cv = cross_gpu.fit_straggler(steps, specs, seen)
    unseen = row(8, 0.0)
    predicted = cross_gpu.scaling_prediction(steps, specs, unseen, one, cv)
    assert predicted == pytest.approx(unseen.throughput, rel=0.05)


def test_more_straggling_predicts_less_multi_gpu_throughput() -> None:
    specs, steps = cross_gpu.Specs(), cross_gpu.Steps(synthetic)
    one = cross_gpu.Row("A100", "A100-80GB", 1, 1000.0, 256)
    eight = cross_gpu.Row("8x", "A100-80GB", 8, 1.0, 256)
    thr = [cross_gpu.scaling_prediction(steps, specs, eight, one, cv) for cv in (0.0, 0.05, 0.1)]
    assert thr[0] > thr[1] > thr[2]  # the coefficient the fit moves does move the prediction
    assert thr[0] <= 8 * one.throughput  # no better than linear scaling


def test_one_gpu_rows_are_the_products_step_and_faster_gpus_predict_more() -> None:
    specs, steps = cross_gpu.Specs(), cross_gpu.Steps(synthetic)
    rows = [cross_gpu.Row(g, g, 1, 1.0, 256) for g in ("T4", "V100", "A100-80GB", "H100")]
    throughputs = [cross_gpu.predict_throughput(steps, specs, r) for r in rows]
    assert throughputs == sorted(throughputs)
    p = cross_gpu.parts(steps, specs.get("V100"), 1, 256)
    assert p["device"] > p["dispatch"] and p["t2"] >= p["device"]


@pytest.mark.skipif(not cross_gpu.DATA.exists(), reason="GPU throughput data not here")
def test_data_rows_map_to_known_gpus_with_per_gpu_batches() -> None:
    rows = cross_gpu.read_rows(cross_gpu.DATA)
    singles = {r.gpu for r in rows if r.n == 1}
    assert {"V100", "A100-80GB", "H100", "RTX 4090"} <= singles
    v100 = [r for r in rows if r.gpu == "V100"]
    assert sorted(r.n for r in v100) == [1, 2, 4, 8]
    assert all(r.batch_per_gpu == 128 for r in v100)  # 128, 256, 512, 1024 global
    specs = cross_gpu.Specs()
    for r in rows:
        assert specs.get(r.gpu).sm_count  # every GPU has the kernel model's figures
