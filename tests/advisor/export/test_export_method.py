"""Issue #48's "done when": a LoRA row exported to SkyPilot and SageMaker runs LoRA. A study of
``hf:meta-llama/Llama-3.1-8B`` under ``--method lora`` on the export tests' replay table (run
times given, nothing traced or downloaded); its recommended row exported to each target, whose
``python -m advisor.train`` command carries the whole reference (the method and its options),
which ``advisor.train`` reads as what to build and train (``search_spaces/hf``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from advisor.search_spaces.hf.ref import parse
from cli_run import run
from export_study import args_of, table

MODEL = "hf:meta-llama/Llama-3.1-8B"


@pytest.fixture(scope="module")
def lora_study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("export-lora")
    patch = pytest.MonkeyPatch()
    patch.setenv("ADVISOR_HOME", str(folder / "home"))
    table().save(folder / "table.json")
    (folder / "space.yaml").write_text(
        f"workload: {MODEL}\nbatch_sizes: [256, 512]\nmachines:\n  include_local: false\n"
    )
    storage = f"sqlite:///{folder / 's.db'}"
    result = run(
        "suggest", "--model", MODEL, "--method", "lora", "--tokens", "2000000",
        "--space", str(folder / "space.yaml"), "--budget", "5000", "--trials", "3",
        "--storage", storage, "--backend", f"replay:{folder / 'table.json'}", "--json",
    )  # fmt: skip
    patch.undo()
    assert result.code == 0, result
    return {"report": json.loads(result.out), "storage": storage, "folder": folder}


def _exported(study: dict[str, Any], to: str, name: str) -> Path:
    out = study["folder"] / name
    result = run("export", "--study", study["report"]["study"], "--storage", study["storage"],
                 "--to", to, "--out", str(out))  # fmt: skip
    assert result.code == 0, result
    return out


def _lora(model: str) -> None:
    ref = parse(model)
    assert ref.model == "meta-llama/Llama-3.1-8B" and ref.method == "lora", model


def test_a_lora_row_exported_to_skypilot_runs_lora(lora_study: dict[str, Any]) -> None:
    rec = lora_study["report"]["recommended"]
    task = yaml.safe_load(_exported(lora_study, "skypilot", "task.yaml").read_text())
    run_line = task["run"]
    for env, value in task["envs"].items():
        run_line = run_line.replace(f'"${{{env}}}"', value)
    args = args_of(run_line.split())
    _lora(args["model"])
    assert args["model"] == lora_study["report"]["workload"]
    assert int(args["batch-size"]) == rec["batch_size"]


@pytest.mark.slow  # imports the cloud SDK
def test_a_lora_row_exported_to_sagemaker_runs_lora_and_passes_botocore(
    lora_study: dict[str, Any],
) -> None:
    import boto3
    from botocore.stub import Stubber

    request = json.loads(_exported(lora_study, "sagemaker", "job.json").read_text())
    spec = request["AlgorithmSpecification"]
    args = args_of([*spec["ContainerEntrypoint"], *spec["ContainerArguments"]])
    _lora(args["model"])
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")  # fmt: skip
    with Stubber(client) as stub:  # botocore's own parameter validation of the request
        stub.add_response("create_training_job", {"TrainingJobArn": "arn:x"}, request)
        client.create_training_job(**request)
