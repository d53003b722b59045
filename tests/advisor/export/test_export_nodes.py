"""Issue #49: a row on several machines is exported with its node count and the launcher that
joins them, each checked by its own tool: SkyPilot's loader (``num_nodes``, a ``torchrun`` line
on SkyPilot's variables), botocore's model (SageMaker ``InstanceCount``), Vertex AI's
``CustomJob`` (workerpool0 + workerpool1 replicas), Azure ML's ``load_job`` (``instance_count``
and a PyTorch distribution). The rows are the planned study's (conftest), made 4-machine rows
with an HSDP plan the way the report writes them (``nodes``, ``training_plan.replicate``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from export_study import row_number

from advisor.export.api import export
from advisor.prediction.step.plan import TrainingPlan, parse_plan

NODES = 4
HSDP = TrainingPlan("bf16", sharding="parameters", replicate="nodes")


def _on_nodes(report: dict[str, Any], provider: str) -> tuple[dict[str, Any], int]:
    """The report with its row of ``provider`` on ``NODES`` machines under HSDP."""
    n = row_number(report, provider)
    ranking = [dict(r) for r in report["ranking"]]
    ranking[n - 1].update(nodes=NODES, training_plan=HSDP.to_dict(), plan=HSDP.words())
    return dict(report, ranking=ranking), n


def _args(argv: list[str]) -> dict[str, str]:
    rest = argv[argv.index("advisor.train") + 1 :]
    return {rest[i].removeprefix("--"): rest[i + 1] for i in range(0, len(rest), 2)}


def test_skypilot_task_has_num_nodes_and_a_torchrun_line(plan_study: dict[str, Any]) -> None:
    report, n = _on_nodes(plan_study["report"], "aws")
    exported = export("skypilot", report=report, row=n)
    task = yaml.safe_load(exported.text)
    assert task["num_nodes"] == NODES
    run = task["run"]
    assert run.startswith(
        "torchrun --nnodes=${SKYPILOT_NUM_NODES} --node-rank=${SKYPILOT_NODE_RANK} "
        "--nproc-per-node=${SKYPILOT_NUM_GPUS_PER_NODE} "
        '--master-addr="$(echo "$SKYPILOT_NODE_IPS" | head -n1)" --master-port=29500 '
        "-m advisor.train "
    )
    assert parse_plan(_args(run.split())["plan"]) == HSDP
    assert f"# {exported.row.machine}" in exported.text and "4 machines of 8 x" in exported.text


def test_one_machine_rows_keep_python_and_num_nodes_1(plan_study: dict[str, Any]) -> None:
    task = yaml.safe_load(export("skypilot", report=plan_study["report"]).text)
    assert task["num_nodes"] == 1 and task["run"].startswith("python -m advisor.train ")


@pytest.mark.slow  # imports the cloud SDK
def test_sagemaker_asks_for_n_instances(plan_study: dict[str, Any], tmp_path: Path) -> None:
    import boto3
    from botocore.stub import Stubber

    report, n = _on_nodes(plan_study["report"], "aws")
    out = tmp_path / "job.json"
    export("sagemaker", report=report, row=n, out=out)
    request = json.loads(out.read_text())
    assert request["ResourceConfig"]["InstanceCount"] == NODES
    spec = request["AlgorithmSpecification"]  # advisor.train joins them (advisor.train.launch)
    assert spec["ContainerEntrypoint"] == ["python", "-m", "advisor.train"]
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")  # fmt: skip
    with Stubber(client) as stub:
        stub.add_response("create_training_job", {"TrainingJobArn": "arn:x"}, request)
        client.create_training_job(**request)


@pytest.mark.slow  # imports the cloud SDK
def test_vertex_job_has_a_head_and_n_minus_1_workers(
    plan_study: dict[str, Any], tmp_path: Path
) -> None:
    from google.cloud import aiplatform_v1 as v1

    report, n = _on_nodes(plan_study["report"], "gcp")
    out = tmp_path / "job.json"
    export("vertex", report=report, row=n, out=out)
    pools = v1.CustomJob.from_json(out.read_text()).job_spec.worker_pool_specs
    assert [p.replica_count for p in pools] == [1, NODES - 1]
    assert pools[0].machine_spec == pools[1].machine_spec
    assert pools[0].container_spec.command == pools[1].container_spec.command


@pytest.mark.slow  # imports the cloud SDK
def test_azureml_job_has_instance_count_and_a_pytorch_distribution(
    plan_study: dict[str, Any], tmp_path: Path
) -> None:
    from azure.ai.ml import load_job

    report, n = _on_nodes(plan_study["report"], "azure")
    out = tmp_path / "job.yml"
    export("azureml", report=report, row=n, out=out)
    job = load_job(out)
    gpus = report["ranking"][n - 1]["gpus"]
    assert job.resources.instance_count == NODES
    assert job.distribution.type == "pytorch"
    assert job.distribution.process_count_per_instance == gpus
    assert job.environment_variables["LOCAL_WORLD_SIZE"] == str(gpus)
