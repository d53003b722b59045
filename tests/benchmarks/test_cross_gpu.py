"""benchmarks/cross_gpu.py: the fit recovers known constants, and the data set is read right."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from advisor.probes.perf.signature import WorkloadSignature

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "cross_gpu.py"
_spec = importlib.util.spec_from_file_location("_bench_cross_gpu", BENCH)
assert _spec and _spec.loader
cross_gpu = importlib.util.module_from_spec(_spec)
sys.modules["_bench_cross_gpu"] = cross_gpu
_spec.loader.exec_module(cross_gpu)

# A ResNet-50-like signature (FLOPs and activation bytes of the order counted at 224x224).
SIG = WorkloadSignature(
    workload="synthetic", framework="torch", batch_size=256, threads=1, device="cpu",
    t2_s=1.0, t2_spread=1.0, t1_s=1.0, init_s=0.0, v1_s=None, v2_s=None, n_val=0,
    flops_per_sample=23e9, flops_counted=True, parameters=25_000_000,
    gradient_bytes=1e8, activation_bytes_per_sample=1.5e8, input_bytes_per_sample=6e5,
    ops_per_iteration=1400, ops_measured=True, data_s_per_sample=None,
)  # fmt: skip
GPUS = ["V100", "Quadro RTX 8000", "A10", "A100-80GB", "RTX 4090", "H100 80GB PCIe", "H100"]


def test_fit_recovers_the_constants_that_generated_the_throughputs() -> None:
    pytest.importorskip("scipy")
    specs = cross_gpu.Specs()
    truth = ({"tensor": 0.45, "fp32": 0.6}, 0.55)
    rows = []
    for gpu in GPUS:
        row = cross_gpu.Row(gpu, gpu, 1, 1.0, 256)
        thr = cross_gpu.predict_throughput(SIG, specs, row, truth)
        rows.append(cross_gpu.Row(gpu, gpu, 1, thr, 256))
    eff, mem = cross_gpu.fit_single(SIG, specs, rows)
    assert eff["tensor"] == pytest.approx(0.45, rel=1e-3)
    assert eff["fp32"] == pytest.approx(0.6, rel=1e-3)
    assert mem == pytest.approx(0.55, rel=1e-3)
    # Leave one out on exact data: the left-out GPU is predicted exactly.
    fit = cross_gpu.fit_single(SIG, specs, rows[1:])
    assert cross_gpu.predict_throughput(SIG, specs, rows[0], fit) == pytest.approx(
        rows[0].throughput, rel=1e-3
    )


def test_straggler_fit_recovers_the_scaling_coefficient() -> None:
    specs = cross_gpu.Specs()
    fit = ({"tensor": 0.5, "fp32": 0.6}, 0.5)
    one = cross_gpu.Row("A100", "A100-80GB", 1, 1000.0, 256)
    pairs = []
    for n in (2, 4, 8):
        row = cross_gpu.Row(f"{n}x", "A100-80GB", n, 1.0, 256)
        thr = cross_gpu.scaling_prediction(SIG, specs, row, one, fit, 0.04)
        pairs.append((cross_gpu.Row(f"{n}x", "A100-80GB", n, thr, 256), one))
    assert cross_gpu.fit_straggler(SIG, specs, pairs, fit) == pytest.approx(0.04)


@pytest.mark.skipif(not cross_gpu.DATA.exists(), reason="shared GPU throughput data not here")
def test_data_rows_map_to_known_gpus_with_per_gpu_batches() -> None:
    rows = cross_gpu.read_rows(cross_gpu.DATA)
    singles = {r.gpu for r in rows if r.n == 1}
    assert {"V100", "A100-80GB", "H100", "RTX 4090"} <= singles
    v100 = [r for r in rows if r.gpu == "V100"]
    assert sorted(r.n for r in v100) == [1, 2, 4, 8]
    assert all(r.batch_per_gpu == 128 for r in v100)  # 128, 256, 512, 1024 global
    specs = cross_gpu.Specs()
    for r in rows:
        specs.get(r.gpu)  # every GPU has a spec
