"""`advisor suggest --cloud-probes N` end to end (issue #14): real local probes, the real job
command of each remote probe run by the local emulation (``LocalJobRunner``), the real
re-screen, trial loop and report; and the ledger path of a non-emulated remote probe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli, main

MACHINES = ["ec2:g5.xlarge", "ec2:g4dn.xlarge", "ec2:g6.xlarge", "sagemaker:ml.g5.xlarge"]
SPACE = (
    "workload: fcn\n"
    f"machines: {{instance_types: [{', '.join(MACHINES)}], spot: false}}\n"
    "batch_sizes: [256, 512]\n"
    "hyperparameters:\n  lr: {type: float, low: 0.01, high: 0.3, log: true}\n"
)
CLOUD_YAML = (
    "image: advisor:test\n"
    "sagemaker: {role: 'arn:aws:iam::123456789012:role/advisor', output: 's3://advisor-test/p'}\n"
)


def _suggest(tmp_path: Path, *extra: str) -> Any:
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    config = tmp_path / "cloud.yaml"
    config.write_text(CLOUD_YAML)
    args = [
        "suggest", "--model", "fcn", "--budget", "5", "--cloud-probes", "3",
        "--emulate-cloud-probes", "--cloud-config", str(config), "--space", str(space),
        "--probe-iterations", "4", *extra,
    ]  # fmt: skip
    return CliRunner().invoke(cli, args, env={"COLUMNS": "220"})


@pytest.mark.slow
def test_suggest_cloud_probes_measures_three_machines_through_the_job_command(
    tmp_path: Path,
) -> None:
    result = _suggest(tmp_path, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    cloud = report["cloud_probes"]
    jobs = cloud["jobs"]
    # Three distinct machines, A10G, T4 and L4 (one of each type) before a second A10G box.
    assert len(jobs) == 3 and cloud["new"] == 3, cloud
    accelerators = {j["accelerator"] for j in jobs}
    assert accelerators == {"A10G", "T4", "L4"}
    for j in jobs:
        # Emulated: the job command ran here, labelled so, billed at the machine's price.
        assert j["emulated"] is True and j["service"] == "local" and j["state"] == "completed"
        assert j["measured"] is True and j["billed_s"] > 0 and j["wall_s"] > 0
        assert j["cost_usd"] == pytest.approx(j["billed_s"] * j["price_per_hour"] / 3600)
        assert j["measured_step_s"] > 0 and j["ratio"] == pytest.approx(
            j["measured_step_s"] / j["predicted_step_s"]
        )
    # The report says how each time is known: the probed (machine, batch) emulated, the rest
    # of the cloud modelled, this machine measured here.
    probed = {(j["machine"], j["batch_size"]) for j in jobs}
    rows = report["ranking"]
    for r in rows:
        if r["service"] == "local":
            assert r["known"] == "here"
        elif (r["machine"], r["batch_size"]) in probed:
            assert r["known"] == "emulated" and r["source"].startswith("emulated (local stand-in)")
        else:
            assert r["known"] == "model"
    assert {(r["machine"], r["batch_size"]) for r in rows if r["known"] == "emulated"} == probed
    # Wherever they rank, the measured machines are listed with their place.
    placed = report["measured_elsewhere"]
    assert {(r["machine"], r["batch_size"]) for r in placed} == probed
    assert all(1 <= r["rank"] <= report["ranking_total"] for r in placed)
    # The probe budget holds the cloud probes' real charge and the trials' together.
    probes = report["probes"]
    assert cloud["spent_usd"] == pytest.approx(sum(j["charged_usd"] for j in jobs), abs=1e-6)
    assert cloud["spent_usd"] <= probes["spent_usd"] <= probes["budget_usd"] + 1e-9

    # The same command again resumes: nothing new is probed or charged, the report says so:
    # in one line of the one-screen report, and job by job with --verbose.
    brief = _suggest(tmp_path)
    assert brief.exit_code == 0, brief.output
    assert "cloud probes (--cloud-probes 3): 3 job(s) (0 new)" in brief.stdout
    assert "3 emulated here" in brief.stdout
    text = _suggest(tmp_path, "--verbose")
    assert text.exit_code == 0, text.output
    out = " ".join(text.stdout.split())  # lines wrapped at the piped width joined
    assert "Cloud probes (--cloud-probes 3)" in out and "emulated here" in out
    assert "cloud probes: 3 job(s) (0 new)" in out
    assert "already probed 3 machine(s)" in out
    assert out.count("emulated on the machine: ") == 3  # each measured machine's rank line
    assert "known: " in out and "emulated = emulated (local stand-in), extrapolated" in out


def test_cloud_probes_with_server_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["suggest", "--model", "fcn", "--cloud-probes", "2", "--server", "http://x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--cloud-probes has no meaning with --server" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cloud_probes_on_the_replay_back_end_say_so_and_the_run_carries_on(
    capsys: pytest.CaptureFixture[str], table_file: Path, tmp_path: Path
) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("workload: fcn\nbatch_sizes: [256, 512]\n")
    main(["suggest", "--model", "fcn", "--budget", "5", "--cloud-probes", "2", "--space",
          str(space), "--backend", f"replay:{table_file}", "--json"])  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    cloud = report["cloud_probes"]
    assert cloud["jobs"] == [] and cloud["stop_reason"].startswith("cloud probes need the local")
    assert report["recommended"] is not None
    assert {r["known"] for r in report["ranking"]} <= {"replay", "here", "model"}
