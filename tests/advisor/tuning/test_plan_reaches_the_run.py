"""Issue #35: the training plan ``advisor suggest`` chose reaches the managed jobs: the spec
carries it as the entry point's ``--plan`` (a fixed value), each service's request passes it
(SageMaker's static hyperparameters, validated by botocore's Stubber; Vertex's and Azure ML's
command-line arguments) and ``python -m advisor.train`` reads it back as the same plan."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from tuning_studies import make_study

from advisor.prediction.step.plan import TrainingPlan, parse_plan
from advisor.tuning.pick import RECOMMENDATION, recommendation_attr
from advisor.tuning.spec import spec_from_study

PLAN = TrainingPlan("fp16", accumulation=4, checkpointing="blocks")


class _NoCatalog:
    def get(self, key: str) -> Any:
        from advisor.errors import AdvisorError

        raise AdvisorError(f"Unknown machine '{key}'.")


def _spec(storage: str, **kw: Any) -> Any:
    study = make_study(storage, training_plan=PLAN.to_dict())
    return spec_from_study(study, "sagemaker", image="img", catalog=_NoCatalog(), **kw), study


def test_the_spec_carries_the_plan_of_the_recommended_row(storage: str) -> None:
    spec, _ = _spec(storage)
    assert spec.fixed["plan"] == PLAN.arg()
    assert parse_plan(spec.fixed["plan"]) == PLAN  # the text reads back as the same plan
    i = spec.entry_args().index("--plan")
    assert spec.entry_args()[i + 1] == PLAN.arg()


def test_a_plain_row_carries_no_plan_and_another_machine_not_this_one(storage: str) -> None:
    plain = spec_from_study(make_study(storage, name="plain"), "sagemaker", image="img",
                            catalog=_NoCatalog())  # fmt: skip
    assert "plan" not in plain.fixed
    other, _ = _spec(storage, instance="sagemaker:ml.g5.xlarge")
    assert "plan" not in other.fixed
    assert any("not carried over" in n for n in other.notes)


def test_the_saved_recommendation_carries_the_plan(storage: str) -> None:
    study = make_study(storage, name="saved")
    row = {"machine": "sagemaker:ml.p3.2xlarge", "batch_size": 512, "epochs": 14,
           "price_per_hour": 3.825, "hyperparameters": {}, "training_plan": PLAN.to_dict()}  # fmt: skip
    saved = recommendation_attr({"recommended": row})
    assert saved is not None
    study.set_user_attr(RECOMMENDATION, saved)
    spec = spec_from_study(study, "sagemaker", image="img", catalog=_NoCatalog())
    assert spec.fixed["plan"] == PLAN.arg()


def test_sagemaker_static_hyperparameters_carry_the_plan(
    storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from advisor.providers.sagemaker import SageMakerBackend
    from botocore.stub import Stubber

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    spec, _ = _spec(storage, output="s3://bucket/advisor")
    request = SageMakerBackend(role="arn:aws:iam::123456789012:role/R").build_request(spec)
    static = request["TrainingJobDefinition"]["StaticHyperParameters"]
    assert static["plan"] == PLAN.arg()
    client = boto3.client("sagemaker", region_name="us-east-1")
    arn = "arn:aws:sagemaker:us-east-1:123456789012:hyper-parameter-tuning-job/x"
    with Stubber(client) as stub:  # botocore validates the request with the plan in it
        stub.add_response("create_hyper_parameter_tuning_job",
                          {"HyperParameterTuningJobArn": arn}, request)  # fmt: skip
        client.create_hyper_parameter_tuning_job(**request)
        stub.assert_no_pending_responses()
    # the training container reads its hyperparameters as --name value pairs
    from advisor.train.entry import parse_args

    args, _ = parse_args([f"--{k}={v}" for k, v in static.items()])
    assert parse_plan(args.plan) == PLAN


@pytest.mark.slow  # the Azure ML and Vertex SDKs take ~2 s each to import
def test_vertex_and_azureml_commands_carry_the_plan(storage: str) -> None:
    from advisor.providers.azureml import AzureMLBackend
    from advisor.providers.vertex import VertexBackend

    spec, _ = _spec(storage, output="gs://bucket/advisor")
    vertex = dataclasses.replace(spec, instance_type="n1-standard-8")
    built = VertexBackend(project="p1", location="us-central1").build_request(vertex)
    args = built["trialJobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    assert args[args.index("--plan") + 1] == PLAN.arg()
    azure = dataclasses.replace(spec, instance_type="Standard_NC6s_v3", strategy="random")
    body = AzureMLBackend(compute="gpu-nc6").build_request(azure)["properties"]
    assert f"--plan {PLAN.arg()}" in body["trial"]["command"]
