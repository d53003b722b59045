"""``benchmarks/cpu_rate.py`` reads this CPU's matrix-product rate both ways, quiet and beside
spinning processes, and prints the ranges and the busy/quiet ratios."""

from __future__ import annotations

import pytest
from repo_paths import load_benchmark


@pytest.mark.slow  # two fresh processes importing PyTorch, one beside a spinning process
def test_both_readings_quiet_and_busy(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_benchmark("cpu_rate")
    assert bench.main(["--processes", "1", "--busy", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("GFLOP/s, median") == 4 and "beside 1 spinning" in out
    assert "busy / quiet, old: x" in out and "busy / quiet, new: x" in out
