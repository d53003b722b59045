"""``benchmarks/trace_carry.py`` carries a declared builder's operator trace and prints how it
compares with the whole trace."""

from __future__ import annotations

import pytest
from repo_paths import ROOT, load_benchmark


def test_one_workload_carried_and_traced_whole(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))  # examples/, as the benchmark finds it
    bench = load_benchmark("trace_carry")
    assert bench.main(["--workloads", "trace_user_models:deep_mini", "--batches", "2"]) == 0
    out = capsys.readouterr().out
    assert "| deep_mini (8 blocks) | 2 |" in out
    row = bench.case("trace_user_models:deep_mini", 2)
    assert row["carried"] and row["counts_differ"] == 0, row
    assert row["flops"] == pytest.approx(1, rel=1e-6) and row["bytes"] == pytest.approx(1, rel=1e-6)
    # the optimizer's multi-tensor kernels are carried as totals over an average call, and
    # the kernel model is not linear in a call's size: 0.1-0.4 % on this toy
    assert all(abs(r - 1) < 0.01 for r in row["step"].values()), row
