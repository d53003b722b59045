"""Issue #45 section 1: what runs is what the report said.

The report of ``plan_study`` (conftest) recommends the issue's row: 8x B200 spot, batch 256,
bf16, micro-batch 16 x 2 accumulation steps, ZeRO-1, 110.7 of 180 GiB per device. Each
target's job carries that whole plan and the report's predictions in ``python -m
advisor.train``'s command, built by the one function ``advisor submit`` uses too; a spot job
resumes from checkpoints where its service keeps them. Checked through the CLI and each SDK's
own loader or validator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from export_study import args_of, export_cli, row_number

from advisor.export.api import export
from advisor.prediction.step.plan import TrainingPlan, parse_plan

ISSUE_PLAN = TrainingPlan("bf16", accumulation=2, sharding="optimizer")
WORDS = "bf16, micro-batch 16 x 2 accumulation steps, optimizer state sharded (ZeRO-1)"


def check_plan_and_predictions(args: dict[str, str], row: dict[str, Any]) -> None:
    """The command runs the row's whole plan and carries what the report predicted for it."""
    assert parse_plan(args["plan"]) == TrainingPlan.from_dict(row["training_plan"])
    expected = row["expected"]
    assert float(args["expect-peak-gib"]) == pytest.approx(expected["peak_gib"], rel=1e-3)
    assert float(args["expect-peak-high-gib"]) == pytest.approx(expected["peak_high_gib"], rel=1e-3)
    assert float(args["expect-step-s"]) == pytest.approx(expected["step_s"], rel=1e-3)
    assert args["device"] == "cuda" and args["model"] == "fcn"


def _exported(
    plan_study: dict[str, Any], provider: str, to: str, name: str
) -> tuple[Any, Path, Any]:
    n = row_number(plan_study["report"], provider)
    out = plan_study["folder"] / name
    result = export_cli(plan_study, "--to", to, "--row", str(n), "--out", str(out))
    assert result.code == 0, result
    return plan_study["report"]["ranking"][n - 1], out, result


def test_the_recommendation_is_the_issues_row(plan_study: dict[str, Any]) -> None:
    rec = plan_study["report"]["recommended"]
    assert (rec["machine"], rec["batch_size"], rec["gpus"]) == ("ec2:p6-b200.48xlarge:spot", 256, 8)
    assert TrainingPlan.from_dict(rec["training_plan"]) == ISSUE_PLAN and rec["plan"] == WORDS
    assert rec["expected"]["peak_gib"] == pytest.approx(110.7)
    assert rec["expected"]["step_s"] == pytest.approx(1.21)


def test_skypilot_task_runs_the_plan_as_a_managed_job(plan_study: dict[str, Any]) -> None:
    """`suggest --export skypilot:FILE`: the plan, the predictions, a checkpoint bucket mounted
    and --checkpoint-dir on it; the header and the summary say the plan in words."""
    rec = plan_study["report"]["recommended"]
    text = plan_study["task"].read_text()
    task = yaml.safe_load(text)
    run = task["run"]
    for env, value in task["envs"].items():
        run = run.replace(f"${{{env}}}", value)
    args = args_of(run.split())
    check_plan_and_predictions(args, rec)
    (mount,) = task["file_mounts"].items()
    assert mount[0] == "/checkpoints" and mount[1]["mode"] == "MOUNT" and mount[1]["store"] == "s3"
    assert args["checkpoint-dir"] == f"/checkpoints/{task['name']}"
    assert f"# Plan: {WORDS}." in text and "`sky jobs launch` this file" in text
    assert "peak memory 110.7 (up to 125.2) of 180 GiB per device, steady step 1.21 s" in text
    err = plan_study["err"]
    assert f"plan: {WORDS} (--plan {ISSUE_PLAN.arg()})" in err
    assert "submit: sky jobs launch" in err


@pytest.mark.slow  # imports the cloud SDK
def test_sagemaker_job_runs_the_plan_and_resumes(plan_study: dict[str, Any]) -> None:
    import boto3
    from botocore.stub import Stubber

    row, out, result = _exported(plan_study, "aws", "sagemaker", "plan-job.json")
    request = json.loads(out.read_text())
    spec = request["AlgorithmSpecification"]
    args = args_of([*spec["ContainerEntrypoint"], *spec["ContainerArguments"]])
    check_plan_and_predictions(args, row)
    assert row["spot"] and request["EnableManagedSpotTraining"] is True
    ckpt = request["CheckpointConfig"]
    assert ckpt["LocalPath"] == args["checkpoint-dir"] == "/opt/ml/checkpoints"
    output = request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
    assert ckpt["S3Uri"] == f"{output}/{request['TrainingJobName']}/checkpoints"
    stop = request["StoppingCondition"]
    assert stop["MaxRuntimeInSeconds"] <= stop["MaxWaitTimeInSeconds"] <= 28 * 24 * 3600
    assert f"plan: {WORDS}" in result.out
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")  # fmt: skip
    with Stubber(client) as stub:  # botocore's own validation of the request, plan included
        stub.add_response("create_training_job", {"TrainingJobArn": "arn:x"}, request)
        client.create_training_job(**request)


@pytest.mark.slow  # imports the cloud SDK
def test_vertex_job_runs_the_plan_and_restarts(plan_study: dict[str, Any]) -> None:
    from google.cloud import aiplatform_v1 as v1

    row, out, _ = _exported(plan_study, "gcp", "vertex", "plan-job-vertex.json")
    job = v1.CustomJob.from_json(out.read_text())
    check_plan_and_predictions(
        args_of(list(job.job_spec.worker_pool_specs[0].container_spec.command)), row
    )
    assert job.job_spec.scheduling.strategy == v1.Scheduling.Strategy.SPOT
    assert job.job_spec.scheduling.restart_job_on_worker_restart is True
    # AIP_CHECKPOINT_DIR is <baseOutputDirectory>/checkpoints/: the job's own folder
    assert job.job_spec.base_output_directory.output_uri_prefix.endswith("/" + job.display_name)


@pytest.mark.slow  # imports the cloud SDK
def test_azureml_job_runs_the_plan_and_mounts_its_checkpoints(plan_study: dict[str, Any]) -> None:
    from azure.ai.ml import load_job

    row, out, _ = _exported(plan_study, "azure", "azureml", "plan-job.yml")
    job = load_job(out)
    args = args_of(job.command.split())
    check_plan_and_predictions(args, row)
    assert args["checkpoint-dir"] == "${{outputs.checkpoints}}"
    ckpt = job.outputs["checkpoints"]
    assert ckpt.mode == "rw_mount" and ckpt.path.startswith("azureml://datastores/")
    assert ckpt.path.rstrip("/").endswith(job.name)
    assert str(job.queue_settings.job_tier).lower() == "spot"


def test_submit_and_export_build_one_command(plan_study: dict[str, Any]) -> None:
    """`advisor submit --study` and `advisor export` pass advisor.train the same values for
    the recommended row (submit adds only its objective metric and leaves the tuned ones out)."""
    from advisor.tuning.jobs import load_study
    from advisor.tuning.spec import spec_from_study

    study = load_study(plan_study["report"]["study"], plan_study["storage"])
    spec = spec_from_study(study, "sagemaker", image="img", tune=["lr"])
    exported = export("skypilot", report=plan_study["report"]).row.train_values()
    submitted = spec.static_values()
    assert submitted.pop("metric") == "val_accuracy"
    assert submitted == {k: v for k, v in exported.items() if k != "lr"}
    assert parse_plan(submitted["plan"]) == ISSUE_PLAN


def test_an_on_demand_row_runs_the_plan_without_checkpoint_mounts(
    plan_study: dict[str, Any],
) -> None:
    report = plan_study["report"]
    row = dict(report["recommended"], machine="ec2:p6-b200.48xlarge", spot=False)
    task = yaml.safe_load(export("skypilot", report=dict(report, recommended=row)).text)
    assert "file_mounts" not in task and "--checkpoint-dir" not in task["run"]
    assert f"--plan {ISSUE_PLAN.arg()}" in task["run"]


@pytest.mark.slow  # trains fcn for one short epoch under the plan (about 30-60 s here)
def test_the_exported_command_runs_here_and_says_what_it_measured(
    plan_study: dict[str, Any],
) -> None:
    """The SageMaker job of the 1x A10G row (bf16, 2 accumulation steps, checkpointed blocks),
    run as exported on this machine's CPU with a few hundred samples: it says the plan it ran
    and the report's predictions first, its measured peak and steady step beside them last."""
    import re
    import subprocess
    import sys

    from advisor.providers.tuning import metric_regex

    report = plan_study["report"]
    n = next(i for i, r in enumerate(report["ranking"], 1) if r["machine"] == "ec2:g5.xlarge:spot")
    row = report["ranking"][n - 1]
    out = plan_study["folder"] / "a10g-job.json"
    assert export_cli(plan_study, "--to", "sagemaker", "--row", str(n), "--out", str(out)).code == 0
    spec = json.loads(out.read_text())["AlgorithmSpecification"]
    argv = [*spec["ContainerEntrypoint"], *spec["ContainerArguments"]]
    args = args_of(argv)
    assert parse_plan(args["plan"]) == TrainingPlan("bf16", 2, "blocks", "none")
    # this machine: its CPU, a small batch and a few hundred samples, its own checkpoint folder
    args |= {"device": "cpu", "batch-size": "64", "epochs": "1", "n-train": "256", "n-val": "64",
             "threads": "1", "checkpoint-dir": str(plan_study["folder"] / "a10g-ckpt")}  # fmt: skip
    command = [sys.executable, "-m", "advisor.train"]
    for name, value in args.items():
        command += [f"--{name}", value]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[1] == (
        "advisor-train: plan bf16, micro-batch 32 x 2 accumulation steps, checkpointed blocks; "
        f"the report predicted peak memory {row['expected']['peak_gib']:.4g} GiB (up to "
        f"{row['expected']['peak_high_gib']:.4g}) per device, steady step "
        f"{row['expected']['step_s']:.4g} s"
    )
    (last,) = [line for line in lines if line.startswith("advisor-train: measured")]
    want = row["expected"]
    assert "(process peak RSS on the CPU" in last
    assert f"vs predicted {want['peak_gib']:.4g} GiB (up to {want['peak_high_gib']:.4g})" in last
    assert re.search(r"steady step [0-9.e+-]+ s \(median of steps 2\.\.n\) vs predicted "
                     + re.escape(f"{want['step_s']:.4g} s"), last)  # fmt: skip
    peak = [float(v) for v in re.findall(metric_regex("peak_memory_gib"), done.stdout)]
    step = [float(v) for v in re.findall(metric_regex("steady_step_s"), done.stdout)]
    assert len(peak) == 1 and 0.05 < peak[0] < 64 and len(step) == 1 and step[0] > 0


def test_export_help_says_the_plan_is_exported() -> None:
    from cli_run import run

    result = run("export", "--help")
    text = " ".join(result.out.split())
    assert result.code == 0
    assert "the training plan (precision, accumulation, checkpointing, sharding)" in text
    assert "python -m advisor.train" in text
