"""Issue #37: `advisor export` and `suggest --export` write exactly the row the report printed
-- machine, region, spot, batch size, epochs, hyperparameters, plan -- as a SkyPilot task and as
each managed service's training job, built with the SDK's own types; bad input is one line and
writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from export_study import export_cli, row_number

from advisor.errors import AdvisorError
from advisor.export.api import export
from advisor.export.skypilot import sky_instance
from advisor.prediction.step.plan import TrainingPlan


def _train_args(argv: list[str]) -> dict[str, str]:
    """``--name value`` pairs of an advisor.train command line, without the checkpoint folder
    (where each service keeps a spot job's checkpoints: test_export_plan.py)."""
    start = argv.index("advisor.train") + 1
    rest = argv[start:]
    pairs = {rest[i].lstrip("-"): rest[i + 1] for i in range(0, len(rest), 2)}
    pairs.pop("checkpoint-dir", None)
    return pairs


def _expected_args(row: dict[str, Any], workload: str) -> dict[str, str]:
    """What the row's command must say: its workload, batch, epochs, device, hyperparameters,
    and (issue #45) the whole plan it was predicted under and what the report predicted."""
    out = {"model": workload, "batch-size": str(row["batch_size"]), "epochs": str(row["epochs"])}
    out["device"] = "cuda" if row["gpus"] else "cpu"
    out |= {k.replace("_", "-"): str(v) for k, v in (row["hyperparameters"] or {}).items()}
    if row.get("training_plan"):
        out["plan"] = TrainingPlan.from_dict(row["training_plan"]).arg()
    expected = row.get("expected") or {}
    for flag, key in (("expect-peak-gib", "peak_gib"), ("expect-peak-high-gib", "peak_high_gib"),
                      ("expect-step-s", "step_s")):  # fmt: skip
        if expected.get(key):
            out[flag] = f"{expected[key]:.4g}"
    return out


def _task_args(task: dict[str, Any]) -> dict[str, str]:
    run = task["run"]
    for env, value in task["envs"].items():
        run = run.replace(f'"${{{env}}}"', value)
    return _train_args(run.split())


def check_task(task: dict[str, Any], row: dict[str, Any], workload: str) -> None:
    """The SkyPilot task holds the row's machine, region, spot, batch, epochs and values."""
    res = task["resources"]
    itype = row["instance_type"].removeprefix("ml.").split("+")[0]
    assert res["instance_type"].removeprefix("Standard_") == itype
    assert res["cloud"] == row["provider"] and res["region"] == row["region"]
    assert res["use_spot"] is row["spot"] and task["num_nodes"] == 1
    if "+" in row["instance_type"]:  # a GCP N1 machine: its GPUs attached by count
        assert res["accelerators"] == f"{row['accelerator']}:{row['gpus']}"
    assert _task_args(task) == _expected_args(row, workload)


def _exported(study: dict[str, Any], provider: str, to: str, name: str) -> tuple[Any, Path]:
    """Export the first ``provider`` row of the report ``--to`` a file ``name``; return the
    row and the file."""
    n = row_number(study["report"], provider)
    out = study["folder"] / name
    result = export_cli(study, "--to", to, "--row", str(n), "--out", str(out))
    assert result.code == 0, result
    return study["report"]["ranking"][n - 1], out


def test_suggest_export_writes_the_recommended_row(study: dict[str, Any]) -> None:
    report = study["report"]
    rec = report["recommended"]
    assert rec["hyperparameters"], "the study's space tunes lr: the row carries its value"
    check_task(yaml.safe_load(study["task"].read_text()), rec, report["workload"])
    assert f"skypilot task written to {study['task']}" in study["err"]


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_each_clouds_row_as_a_skypilot_task(study: dict[str, Any], provider: str) -> None:
    row, out = _exported(study, provider, "skypilot", f"task-{provider}.yaml")
    check_task(yaml.safe_load(out.read_text()), row, study["report"]["workload"])


@pytest.mark.slow  # imports the cloud SDK
def test_sagemaker_job_is_the_row_and_passes_botocore(study: dict[str, Any]) -> None:
    import boto3
    from botocore.stub import Stubber

    report = study["report"]
    row, out = _exported(study, "aws", "sagemaker", "job.json")
    request = json.loads(out.read_text())
    assert request["ResourceConfig"]["InstanceType"] == "ml." + row["instance_type"].removeprefix(
        "ml."
    )
    assert request["EnableManagedSpotTraining"] is row["spot"]
    spec = request["AlgorithmSpecification"]
    argv = [*spec["ContainerEntrypoint"], *spec["ContainerArguments"]]
    assert _train_args(argv) == _expected_args(row, report["workload"])
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")  # fmt: skip
    with Stubber(client) as stub:  # botocore's own parameter validation of the request
        stub.add_response("create_training_job", {"TrainingJobArn": "arn:x"}, request)
        client.create_training_job(**request)


@pytest.mark.slow  # imports the cloud SDK
def test_vertex_custom_job_is_the_row(study: dict[str, Any]) -> None:
    from google.cloud import aiplatform_v1 as v1

    report = study["report"]
    row, out = _exported(study, "gcp", "vertex", "custom_job.json")
    text = out.read_text()
    assert '"NVIDIA_TESLA_T4"' in text  # enum names, as the REST API documents them
    job = v1.CustomJob.from_json(text)  # the SDK's own type reads it back
    pool = job.job_spec.worker_pool_specs[0]
    assert pool.machine_spec.machine_type == row["instance_type"].split("+")[0]
    assert pool.machine_spec.accelerator_type.name == "NVIDIA_TESLA_T4"
    assert pool.machine_spec.accelerator_count == row["gpus"]
    spot = job.job_spec.scheduling.strategy == v1.Scheduling.Strategy.SPOT
    assert spot is row["spot"]
    assert _train_args(list(pool.container_spec.command)) == _expected_args(row, report["workload"])


@pytest.mark.slow  # imports the cloud SDK
def test_azureml_command_job_is_the_row(study: dict[str, Any]) -> None:
    from azure.ai.ml import load_job

    report = study["report"]
    row, out = _exported(study, "azure", "azureml", "job.yml")
    job = load_job(out)  # the SDK's own loader (what `az ml job create --file` reads)
    assert job.resources.instance_type == f"Standard_{row['instance_type']}"
    assert str(job.queue_settings.job_tier).lower() == ("spot" if row["spot"] else "standard")
    assert _train_args(job.command.split()) == _expected_args(row, report["workload"])


def test_the_plan_spans_the_machines_gpus(study: dict[str, Any]) -> None:
    report = study["report"]
    n = next(i for i, r in enumerate(report["ranking"], 1) if r["gpus"] == 4)
    row = report["ranking"][n - 1]
    done = export("skypilot", report=report, row=n)
    per = row["batch_size"] // 4
    assert f"global batch {row['batch_size']} = {per} per GPU" in done.text


def test_gcp_n1_machines_attach_their_gpus() -> None:
    from advisor.export.row import ExportRow

    row = ExportRow(1, "compute-engine:n1-standard-8+1xT4", "gcp", "compute-engine",
                    "n1-standard-8+1xT4", "T4", 1, "us-central1", False, 256, 10, "fcn", "torch")  # fmt: skip
    assert sky_instance(row) == ("n1-standard-8", "T4:1")


# -- bad input: one line, nothing written ------------------------------------------------------
def _one_line(result: Any) -> str:
    lines = [x for x in result.err.splitlines() if x.strip()]
    assert result.code == 2 and len(lines) == 1 and lines[0].startswith("Error: "), result
    return lines[0]


def test_a_machine_the_target_does_not_run(study: dict[str, Any]) -> None:
    n = row_number(study["report"], "gcp")
    out = study["folder"] / "never.json"
    line = _one_line(export_cli(study, "--to", "sagemaker", "--row", str(n), "--out", str(out)))
    assert "is gcp; sagemaker runs aws machines only" in line and "--to vertex" in line
    assert not out.exists()


def test_a_row_out_of_range(study: dict[str, Any]) -> None:
    total = len(study["report"]["ranking"])
    out = study["folder"] / "never.yaml"
    line = _one_line(
        export_cli(study, "--to", "skypilot", "--row", str(total + 1), "--out", str(out))
    )
    assert f"ranks {total} rows" in line and f"--row 1 to {total}" in line
    assert not out.exists()


def test_an_output_that_cannot_be_written(study: dict[str, Any], tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    line = _one_line(export_cli(study, "--to", "skypilot", "--out", str(blocker / "task.yaml")))
    assert "does not exist" in line or "not a folder" in line or "not writable" in line


def test_a_study_with_no_recommendation() -> None:
    with pytest.raises(AdvisorError, match="no recommendation to export") as err:
        export("skypilot", report={"study": "s", "workload": "fcn", "ranking": []})
    assert "--budget" in str(err.value)


def test_submit_without_settings_is_one_line(study: dict[str, Any]) -> None:
    n = row_number(study["report"], "aws")
    line = _one_line(export_cli(study, "--to", "sagemaker", "--row", str(n), "--submit"))
    assert "needs its role (RoleArn)" in line and "set role under 'sagemaker:'" in line


def test_this_machine_is_no_export_target(study: dict[str, Any]) -> None:
    report = dict(study["report"])
    local = dict(report["recommended"], machine="local:local", provider="local", service="local")
    with pytest.raises(AdvisorError, match="is no cloud machine"):
        export("skypilot", report=dict(report, recommended=local))
