"""Issue #45: every name a cloud constrains is valid from any model reference -- dotted,
200+ characters, non-ASCII -- for every target, checked against each target's own rule (the
SageMaker request against botocore's model, whose Stubber does not check patterns), and the
export's errors name the export, not tuning or probe jobs (issue #50, section 5)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from advisor.errors import AdvisorError
from advisor.export.api import export
from advisor.export.names import MAX_NAME, RULES, bucket_name, check_name, job_name
from advisor.remote.settings import CloudSettings

MODELS = (
    "examples.transformers:gpt2_large",
    "deeply." * 30 + "nested_module:build_the_model",  # 228 characters
    "deeply." * 30 + "nested_module:build_another_one",  # the same 200-character prefix
    "paquete.módulo_ñ:construir_modelo",
    "模型.训练:构建",
    "fcn",
)
ROWS = {  # target -> a row of its cloud
    "sagemaker": ("ec2:p6-b200.48xlarge:spot", "aws", "ec2", "p6-b200.48xlarge", "B200", 8,
                  "us-east-1"),
    "vertex": ("compute-engine:a3-highgpu-8g:spot", "gcp", "compute-engine", "a3-highgpu-8g",
               "H100", 8, "us-central1"),
    "azureml": ("azure-vm:ND96isr_H100_v5:spot", "azure", "azure-vm", "ND96isr_H100_v5", "H100",
                8, "eastus"),
    "skypilot": ("ec2:g5.xlarge:spot", "aws", "ec2", "g5.xlarge", "A10G", 1, "us-east-1"),
}  # fmt: skip


def report(target: str, model: str) -> dict[str, Any]:
    machine, provider, service, itype, acc, gpus, region = ROWS[target]
    row = {"machine": machine, "provider": provider, "service": service, "instance_type": itype,
           "accelerator": acc, "gpus": gpus, "region": region, "spot": True, "batch_size": 256,
           "epochs": 3, "hyperparameters": {}, "runtime_s": {"value": 600.0, "high": 900.0},
           "cost_usd": {"value": 1.0}, "price_per_hour": 6.0,
           "training_plan": {"precision": "bf16", "accumulation": 2, "checkpointing": "none",
                             "sharding": "none"}}  # fmt: skip
    return {"study": "s", "workload": model, "framework": "torch", "recommended": row,
            "ranking": [row]}  # fmt: skip


@pytest.mark.parametrize("model", MODELS)
def test_job_names_follow_every_targets_rule(model: str) -> None:
    name = job_name(model, 256, "20261128-101500")
    assert (
        len(name) <= MAX_NAME
        and name.startswith("advisor-")
        and name.endswith("-b256-20261128-101500")
    )
    for target, rules in RULES.items():
        assert all(rule.fullmatch(name) for rule in rules), (target, name)
        assert check_name(target, name) == name
    bucket = bucket_name(name)
    assert 3 <= len(bucket) <= 63 and re.fullmatch(r"[a-z0-9][a-z0-9-]*[a-z0-9]", bucket)
    assert "--" not in bucket


def test_long_references_sharing_a_prefix_get_two_names() -> None:
    assert job_name(MODELS[1], 256, "x") != job_name(MODELS[2], 256, "x")
    assert job_name("fcn", 256, "20261128-101500") == "advisor-fcn-b256-20261128-101500"


def test_a_given_name_is_checked() -> None:
    with pytest.raises(AdvisorError, match="not a valid sagemaker job name"):
        export("sagemaker", report=report("sagemaker", "fcn"), name="my.job",
               settings=CloudSettings())  # fmt: skip


@pytest.mark.slow  # imports the cloud SDKs
@pytest.mark.parametrize("model", MODELS)
def test_every_target_exports_any_model_reference(model: str, tmp_path: Path) -> None:
    """The export works for the reference (SageMaker failed for every dotted one) and each
    service's own types accept the names; the command keeps the reference whole."""
    import boto3
    from azure.ai.ml import load_job
    from botocore.stub import Stubber
    from google.cloud import aiplatform_v1 as v1

    settings = CloudSettings()
    sm = json.loads(export("sagemaker", report=report("sagemaker", model), settings=settings).text)
    assert RULES["sagemaker"][0].fullmatch(sm["TrainingJobName"])
    assert model in sm["AlgorithmSpecification"]["ContainerArguments"]
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")  # fmt: skip
    with Stubber(client) as stub:
        stub.add_response("create_training_job", {"TrainingJobArn": "arn:x"}, sm)
        client.create_training_job(**sm)
    vx = v1.CustomJob.from_json(export("vertex", report=report("vertex", model),
                                       settings=settings).text)  # fmt: skip
    assert 1 <= len(vx.display_name) <= 128
    assert model in list(vx.job_spec.worker_pool_specs[0].container_spec.command)
    done = export("azureml", report=report("azureml", model), settings=settings)
    path = tmp_path / "job.yml"
    path.write_text(done.text, encoding="utf-8")
    job = load_job(path)
    assert RULES["azureml"][0].fullmatch(job.name) and job.display_name == job.name
    assert job.outputs["checkpoints"].path.rstrip("/").endswith(job.name)


# -- issue #50 section 5: the export's errors name the export ---------------------------------
def _message(exc: pytest.ExceptionInfo[AdvisorError]) -> str:
    text = str(exc.value)
    assert "tuning" not in text.lower() and "probe" not in text.lower(), text
    return text


@pytest.mark.slow  # imports botocore's service model
def test_a_request_sagemaker_would_refuse_names_the_export() -> None:
    settings = CloudSettings(providers={"sagemaker": {"role": "not an arn"}})
    with pytest.raises(AdvisorError) as exc:
        export("sagemaker", report=report("sagemaker", "fcn"), settings=settings)
    text = _message(exc)
    assert "RoleArn" in text and "cloud.yaml" in text


@pytest.mark.parametrize(
    ("target", "settings", "words"),
    [
        (
            "sagemaker",
            {"role": "arn:aws:iam::123456789012:role/R", "output": "gs://b/p", "image": "img"},
            "S3OutputPath",
        ),
        (
            "vertex",
            {"project": "p", "output": "s3://b/p", "image": "img"},
            "The vertex export writes its output and checkpoints to gs://",
        ),
        ("azureml", {"image": "img"}, "--submit to azureml needs its Azure ML subscription"),
    ],
)
def test_submit_errors_name_the_export(
    target: str, settings: dict[str, str], words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for env in ("AZURE_SUBSCRIPTION_ID", "AZURE_RESOURCE_GROUP", "AZUREML_WORKSPACE_NAME"):
        monkeypatch.delenv(env, raising=False)
    with pytest.raises(AdvisorError) as exc:
        export(target, report=report(target, "fcn"), submit=True,
               settings=CloudSettings(providers={target: settings}))  # fmt: skip
    text = _message(exc)
    assert words in text and "cloud.yaml" in text


def test_a_tpu_row_to_vertex_names_the_export() -> None:
    rep = report("vertex", "fcn")
    rep["recommended"] = dict(rep["recommended"], machine="compute-engine:v3-8", accelerator="TPU-v3",
                              instance_type="v3-8", gpus=8)  # fmt: skip
    with pytest.raises(AdvisorError) as exc:
        export("vertex", report=rep, settings=CloudSettings())
    assert "the Vertex AI export" in _message(exc)
