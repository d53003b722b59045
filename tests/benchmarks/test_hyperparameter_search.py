"""benchmarks/hyperparameter_search.py: the work clock, and a tiny end-to-end run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from advisor.probes.short_run import Check, ShortRunRequest, ShortRunResult

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load() -> ModuleType:
    path = BENCHMARKS / "hyperparameter_search.py"
    spec = importlib.util.spec_from_file_location("_bench_hyperparameter_search", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_work_counts_training_samples_and_a_third_of_validation() -> None:
    bench = _load()
    req = ShortRunRequest("fcn", 100, {}, 1000, 300, 2, 4)
    assert bench.work(req, 8, 20) == pytest.approx(2000 + 8 * 300 / 3)  # 10 steps an epoch
    assert bench.work(req, 1, 3) == pytest.approx(300 + 100)
    short = ShortRunRequest("fcn", 300, {}, 1000, 300, 1, 4)  # 4 steps, the last of 100
    assert bench.work(short, 4, 4) == pytest.approx(1000 + 400)


def test_the_work_clock_advances_at_every_check() -> None:
    bench = _load()
    clock = bench.WorkClock()
    seen: list[float] = []

    def train(req: ShortRunRequest, on_check) -> ShortRunResult:  # type: ignore[no-untyped-def]
        result = ShortRunResult()
        for i in (1, 2):
            result.steps += 5  # 2 checks per epoch of 10 steps
            c = Check(i, i / 2, "val_accuracy", 0.5, 0.7, 0.0)
            result.checks.append(c)
            on_check(c)
        return result

    req = ShortRunRequest("fcn", 100, {}, 1000, 300, 1, 2)
    clock.counted(train)(req, lambda c: seen.append(clock()) is None)
    assert seen == [pytest.approx(500 + 100), pytest.approx(1000 + 200)]
    assert clock() == pytest.approx(1200)


@pytest.mark.slow
def test_a_tiny_run_reports_every_method(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _load()
    args = ["--workloads", "fcn", "--n-train", "64", "--n-val", "32", "--eval-n-val", "32",
            "--epochs", "1", "--batch-sizes", "8", "16", "--seeds", "1", "--eval-seeds", "7",
            "--grid-size", "3", "--share", "0.5", "--threads", "1",
            "--cache", str(tmp_path / "cache.json"), "--out", str(tmp_path / "out.json")]  # fmt: skip
    results = bench.main(args)["fcn"]
    assert results["grid"]["runs"] == 3 and results["budget_work"] > 0
    for name in ("tune", "tune-hyperband", "random"):
        (row,) = results[name]
        assert row["work"] <= results["budget_work"] * 1.01 and row["fraction"] >= 0
    out = capsys.readouterr().out
    assert "| fcn | tune |" in out and "rank correlation" in out
    assert (tmp_path / "out.json").exists()
