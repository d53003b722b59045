"""The study benchmarks run and print what they promise (tiny parameters; no timing checks)."""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_study_overhead_reports_every_row(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load("study_overhead")
    assert bench.main(["--trials", "5", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["target_ms_per_trial"] == 20.0 and res["trials_asked"] == 5
    assert res["configurations"] >= 24
    rows = res["rows"]
    assert {(r["storage"], r["mode"]) for r in rows} == {
        (s, m)
        for s in ("sqlite (file, WAL)", "in memory")
        for m in ("sampler only", "screen (best-first)")
    }
    for r in rows:
        assert 1 <= r["trials"] <= 5
        assert r["ms_per_trial"] > 0 and r["total_s"] >= r["loop_s"] > 0
        assert r["ratio_to_target"] == pytest.approx(r["ms_per_trial"] / 20.0, abs=1e-3)
        assert r["meets_target"] is (r["ms_per_trial"] <= res["target_ms_per_trial"])
    assert bench.main(["--trials", "5"]) == 0
    out = capsys.readouterr().out
    assert "ms/trial" in out and "x target" in out and "sqlite" in out


def test_search_efficiency_reports_every_sampler_and_mode(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = _load("search_efficiency")
    args = ["--seeds", "2", "--samplers", "tpe,random", "--max-trials", "40"]
    assert bench.main([*args, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["configurations"] >= 24 and res["target_probes"] == int(0.3 * res["configurations"])
    opt = res["optimum"]
    assert opt["cost_usd"] <= res["budget_usd"] < res["fastest_overall"]["cost_usd"]
    got = {(r["mode"], r["sampler"]) for r in res["results"]}
    assert got == {
        ("screen", "tpe"),
        ("screen", "random"),
        ("screen+pb", "tpe"),
        ("sampler only", "tpe"),
        ("sampler only", "random"),
    }
    for r in res["results"]:
        assert r["seeds"] == 2 and len(r["runs"]) == 2
        for run in r["runs"]:
            assert run["probes"] is None or 1 <= run["probes"] <= res["configurations"]
        # the share and the verdict are what the runs say, against the stated target
        within = [run["probes"] is not None and run["probes"] <= res["target_probes"]
                  for run in r["runs"]]  # fmt: skip
        assert r["share_of_seeds_within_target"] == sum(within) / len(within)
        assert r["target_met"] is (sum(within) / len(within) >= bench.TARGET_SEEDS)
        found = [run["probes"] for run in r["runs"] if run["probes"] is not None]
        assert r["median_probes"] == (statistics.median(found) if len(found) == 2 else None)
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "sampler only" in out and "screen" in out and "median" in out and "p90" in out


def test_multi_node_reports_every_published_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load("multi_node")
    assert bench.main(["--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert len(res["rows"]) == 15 and len(res["picks"]) == 5
    for r in res["rows"]:
        assert r["nodes"] in (2, 4, 8) and r["measured"] > 1 and r["predicted"] > 1
        assert r["error"] == pytest.approx(r["predicted"] / r["measured"] - 1, abs=2e-3)
    assert res["median_abs_error"] == pytest.approx(
        statistics.median(abs(r["error"]) for r in res["rows"]), abs=1e-3
    )
    assert bench.main([]) == 0
    assert "Median |error|" in capsys.readouterr().out


@pytest.mark.slow
def test_probe_memory_reports_both_allocators(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #46: the probe child's memory by phase, with the probe's allocator and without."""
    bench = _load("probe_memory")
    assert bench.main(["--batch", "16", "--steps", "1"]) == 0
    out = capsys.readouterr().out
    for phase in ("torch imported", "setup built (model, data)", "step 1"):
        assert f"| freed memory kept (the probe's) | {phase} |" in out
        assert f"| C library default | {phase} |" in out
    assert "the step's own tensors (default peak - built):" in out
