"""`advisor predict` with a saved probe file (no real probe needed)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from perf_fixtures import FakeCatalog, cpu_machine, gpu_machine, probe, with_synthetic_trace

from advisor.cli.main import cli

P2_P3 = "p2.xlarge,p2.8xlarge,p2.16xlarge,p3.2xlarge,p3.8xlarge,p3.16xlarge"
# issue #26: a probe made ready for prediction (its operator trace and loader time), so
# no trace is taken here (no torch import)
TRACE = {"data_s": 0.004}


def _probe_file(tmp_path: Path, **kw: object) -> Path:
    p = probe(**kw)  # type: ignore[arg-type]
    p = with_synthetic_trace(dataclasses.replace(p, fingerprint=dict(TRACE)))
    path = tmp_path / "probe.json"
    path.write_text(p.to_json())
    return path


@pytest.fixture
def fake_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    machines = {
        "p2.xlarge": gpu_machine("p2.xlarge", "K80", 1, 0.9),
        "p2.8xlarge": gpu_machine("p2.8xlarge", "K80", 8, 7.2),
        "p2.16xlarge": gpu_machine("p2.16xlarge", "K80", 16, 14.4),
        "p3.2xlarge": gpu_machine("p3.2xlarge", "V100", 1, 3.06),
        "p3.8xlarge": gpu_machine("p3.8xlarge", "V100", 4, 12.24),
        "p3.16xlarge": gpu_machine("p3.16xlarge", "V100", 8, 24.48),
        "c5.4xlarge": cpu_machine("c5.4xlarge", 16, 0.68),
    }

    def fake(names: str, snapshot: str | None, filters: object) -> tuple[FakeCatalog, list[object]]:
        return FakeCatalog(), [machines[n] for n in names.split(",")]

    monkeypatch.setattr("advisor.cli.predict._machines", fake)


def test_predict_json_ranks_machines_with_intervals(tmp_path: Path, fake_catalog: None) -> None:
    path = _probe_file(tmp_path)
    args = ["predict", "--model", "fcn", "--batch-size", "512", "--instances", P2_P3]
    result = CliRunner().invoke(cli, [*args, "--epochs", "14", "--probe", str(path), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    rows = out["machines"]
    assert len(rows) == 6 and out["epochs"] == 14
    # issue #14: sorted by the whole job's time (start-up + training)
    runtimes = [r["overheads"]["job_wall_s"]["value"] for r in rows]
    assert runtimes == sorted(runtimes)
    for r in rows:
        rt, cost = r["estimate"]["runtime_s"], r["estimate"]["cost_usd"]
        assert rt["low"] <= rt["value"] <= rt["high"] and cost["low"] <= cost["value"]
        assert r["prediction"]["phases"]["source"] == "modelled"
        assert set(r["sweep"]) == {"5", "10", "14", "20"}
    assert out["fastest"] == rows[0]["machine"]
    norm = out["normalised"]["cost"]
    assert min(v["14"] for v in norm.values()) == 1.0
    cheapest = min(rows, key=lambda r: r["overheads"]["job_cost_usd"]["value"])
    assert out["cheapest"] == cheapest["machine"]


def test_predict_table_output(tmp_path: Path, fake_catalog: None) -> None:
    path = _probe_file(tmp_path)
    args = ["predict", "-m", "fcn", "-b", "512", "-i", f"{P2_P3},c5.4xlarge", "--probe", str(path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "Fastest:" in result.output and "Cheapest:" in result.output
    assert "runtime / best" in result.output and "cost / best" in result.output
    assert "p3.16xlarge" in result.output and "c5.4xlarge" in result.output


def test_probe_for_another_model_is_a_one_line_error(tmp_path: Path, fake_catalog: None) -> None:
    path = _probe_file(tmp_path, workload="simple-cnn")
    args = ["predict", "-m", "fcn", "-b", "512", "-i", "p3.2xlarge", "--probe", str(path)]
    with pytest.raises(SystemExit) as exc:
        from advisor.cli.main import main

        main(args)
    assert exc.value.code == 2


def test_predict_with_the_real_catalog(tmp_path: Path) -> None:
    path = _probe_file(tmp_path)
    args = ["predict", "-m", "fcn", "-b", "512", "-i", P2_P3, "--snapshot", "2021-02"]
    result = CliRunner().invoke(cli, [*args, "--epochs", "14", "--probe", str(path), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    keys = [r["machine"] for r in out["machines"]]
    assert sorted(k.split(":")[-1] for k in keys) == sorted(P2_P3.split(","))
    p2 = next(r for r in out["machines"] if r["machine"].endswith("p2.xlarge"))
    assert p2["price_per_hour"] == pytest.approx(0.90)
