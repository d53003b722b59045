"""``benchmarks/depth_carry.py`` runs one layout and prints its carried peak's errors."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.slow  # about 10 s: an 8-block model traced whole and at 4 and 6 blocks
def test_one_layout_carried_and_traced_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS.parent))  # examples/, as the benchmark finds it
    spec = importlib.util.spec_from_file_location(
        "_bench_depth_carry", BENCHMARKS / "depth_carry.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    row = bench.case("trace_user_models:deep_mini", 8, "precision=bf16,accumulation=2", 1)
    assert row["carried"] and set(row["errors"]) == set(bench.MICROS)
    assert all(abs(e) < 0.01 for e in row["errors"].values()), row
    assert row["whole_gib"][32] > row["whole_gib"][1] > 0
    text = bench.table([row])
    assert "| precision=bf16,accumulation=2 | 1 |" in text and "Most under" in text
