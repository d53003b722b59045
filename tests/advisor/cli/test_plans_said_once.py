"""Issue #50 section 4: a plan is said once and only where it applies, through `advisor
predict` (a saved probe file, a fake catalog) and `advisor suggest`'s options."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from cli_run import error_lines, run
from click.testing import CliRunner
from perf_fixtures import FakeCatalog, gpu_machine, probe, with_synthetic_trace

from advisor.cli.main import cli

MACHINES = {
    "one.v100": gpu_machine("one.v100", "V100", 1, 3.06),
    "eight.v100": gpu_machine("eight.v100", "V100", 8, 24.48),
    "one.a100": gpu_machine("one.a100", "A100", 1, 4.0),
}


@pytest.fixture
def probe_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    def fake(names: str, snapshot: str | None, filters: object) -> tuple[FakeCatalog, list[Any]]:
        return FakeCatalog(), [MACHINES[n] for n in names.split(",")]

    monkeypatch.setattr("advisor.cli.predict._machines", fake)
    p = with_synthetic_trace(dataclasses.replace(probe(batch=64), fingerprint={"data_s": 0.004}))
    path = tmp_path / "probe.json"
    path.write_text(p.to_json())
    return path


def _predict(path: Path, *args: str, batch: int = 64) -> Any:
    base = ["predict", "--model", "fcn", "--batch-size", str(batch), "--epochs", "2",
            "--probe", str(path)]  # fmt: skip
    return CliRunner().invoke(cli, [*base, *args])


def _one_line_error(path: Path, args: list[str], *words: str, batch: int = 64) -> None:
    """``advisor predict ARGS`` as the program runs it: exit 2 and one line naming ``words``."""
    got = run("predict", "--model", "fcn", "--batch-size", str(batch), "--epochs", "2",
              "--probe", str(path), *args)  # fmt: skip
    assert got.code == 2, (got.out, got.err)
    lines = error_lines(got.err)
    assert len(lines) == 1 and "Traceback" not in got.err, got.err
    for w in words:
        assert w in lines[0], lines[0]


def test_two_precisions_that_disagree_are_one_line(probe_file: Path) -> None:
    args = ["-i", "one.a100", "--plan", "precision=fp16", "--precision", "bf16"]
    _one_line_error(probe_file, args, "precision=fp16", "bf16", "once")


def test_the_plans_precision_is_taken_when_precision_is_left_to_auto(probe_file: Path) -> None:
    result = _predict(probe_file, "-i", "one.a100", "--plan", "precision=fp16", "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["machines"]
    assert row["prediction"]["plan"].startswith("fp16")


def test_a_field_given_twice_is_one_line(probe_file: Path) -> None:
    args = ["-i", "one.a100", "--plan", "accumulation=4,accumulate=8"]
    _one_line_error(probe_file, args, "accumulation twice", "4", "8")


def test_sharding_on_one_gpu_is_shown_as_not_applied(probe_file: Path) -> None:
    result = _predict(probe_file, "-i", "one.v100,eight.v100", "--plan", "sharding=parameters",
                      "--precision", "fp32", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    plans = {r["machine"]: r["prediction"]["plan"] for r in doc["machines"]}
    assert "ZeRO" not in plans["ec2:one.v100"] and "ZeRO-3" in plans["ec2:eight.v100"]
    assert any(n.startswith("Not applied: sharding=parameters") and "one.v100" in n
               for n in doc["notes"])  # fmt: skip


def test_a_batch_below_the_gpu_count_leaves_the_machine_out(probe_file: Path) -> None:
    result = _predict(probe_file, "-i", "one.v100,eight.v100", "--json", batch=1)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [r["machine"] for r in doc["machines"]] == ["ec2:one.v100"]
    assert any("batch 1 gives each of their GPUs less than one sample" in n for n in doc["notes"])
    _one_line_error(probe_file, ["-i", "eight.v100"], "less than one sample", "at least 8", batch=1)


def test_auto_is_the_fastest_precision_each_gpu_has_by_the_models_numbers(
    probe_file: Path,
) -> None:
    def job(*args: str) -> float:
        result = _predict(probe_file, "-i", "one.a100", "--json", *args)
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.stdout)["machines"]
        return float(row["overheads"]["job_wall_s"]["value"])

    auto = job()
    assert auto == min(job("--precision", p) for p in ("fp32", "tf32", "bf16", "fp16"))


def test_suggest_refuses_two_precisions_that_disagree() -> None:
    from advisor.errors import AdvisorError
    from advisor.options import SuggestOptions

    with pytest.raises(AdvisorError, match="precision=fp16 and --precision says bf16"):
        SuggestOptions(model="fcn", plan="precision=fp16", precision="bf16")
    SuggestOptions(model="fcn", plan="precision=fp16")  # auto gives way to the plan's
