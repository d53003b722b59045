"""benchmarks/multi_gpu.py: the published rows are read and paired right, and the grid fit
recovers a known serial share through the product's model."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "multi_gpu.py"
sys.path.insert(0, str(BENCH.parent))
_spec = importlib.util.spec_from_file_location("_bench_multi_gpu", BENCH)
assert _spec and _spec.loader
multi_gpu = importlib.util.module_from_spec(_spec)
sys.modules["_bench_multi_gpu"] = multi_gpu
_spec.loader.exec_module(multi_gpu)


def test_rows_pair_each_size_with_its_one_gpu_row() -> None:
    rows = multi_gpu.tf_rows()
    assert {r.model for r in rows} == {"resnet50", "vgg16", "alexnet"}
    pairs = multi_gpu.pairs_of(rows)
    assert pairs and all(one.n == 1 and one.batch == r.batch for r, one in pairs)
    assert all(one.platform == r.platform and one.model == r.model for r, one in pairs)


@pytest.mark.slow
def test_the_serial_share_fit_recovers_a_known_value() -> None:
    specs = multi_gpu.Specs(multi_gpu.HERE / "gpu-throughput")
    one = multi_gpu.Row("tf2017", "lab", "V100", 1, "fcn", 32, 1000.0)  # host-bound: fcn at 32
    made = []
    for n in (2, 4, 8):
        row = dataclasses.replace(one, n=n)
        thr = multi_gpu.scaling(row, one, specs, SERIAL_REPLICA_SHARE=0.3)
        made.append((dataclasses.replace(row, throughput=thr), one))
    fitted = multi_gpu.fit_grid("SERIAL_REPLICA_SHARE", multi_gpu.SERIAL_GRID, made, specs)
    assert fitted == pytest.approx(0.3)


def test_the_generation_profile_fit_recovers_known_shares() -> None:
    import generation_profile as gp

    rows, parts = [], {}
    # Three made-up models: compute-heavy, mixed, memory-heavy (FLOPs, bytes).
    for i, (flops, nbytes) in enumerate(((3e12, 10e9), (1.5e12, 50e9), (0.5e12, 60e9))):
        row = multi_gpu.Row("tf2017", "lab", "K80", 1, f"m{i}", 64, 0.0)
        p = {"flops": flops, "bytes": nbytes, "peak": 4.37e12, "bandwidth": 240e9,
             "dispatch": 0.001, "input": 0.002}  # fmt: skip
        thr = float(gp.throughput(row, p, 1.2, 0.3, 0.64))
        row = dataclasses.replace(row, throughput=thr)
        rows.append(row)
        parts[row] = p
    eff, mem = gp.fit(rows, parts, 0.64)
    assert eff == pytest.approx(1.2, rel=0.03) and mem == pytest.approx(0.3, rel=0.04)
    assert max(abs(e) for e in gp.errors(rows, parts, eff, mem, 0.64)) < 0.03
