"""Issue #49: a recommendation on several machines (``machine`` ``...:xN``) is submitted on
that many: the spec's ``instance_count``, and SageMaker's ``ResourceConfig.InstanceCount`` in
a request botocore's Stubber validates."""

from __future__ import annotations

from typing import Any

import pytest
from tuning_studies import make_study

from advisor.tuning.pick import RECOMMENDATION, recommendation_attr
from advisor.tuning.spec import spec_from_study


class _NoCatalog:
    def get(self, key: str) -> Any:
        from advisor.errors import AdvisorError

        raise AdvisorError(f"Unknown machine '{key}'.")


def test_a_row_on_two_machines_is_submitted_on_two(
    storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from advisor.providers.sagemaker import SageMakerBackend
    from botocore.stub import Stubber

    study = make_study(storage, name="two")
    row = {"machine": "sagemaker:ml.p4d.24xlarge:x2", "batch_size": 512, "epochs": 14,
           "price_per_hour": 2 * 37.7, "hyperparameters": {}, "nodes": 2}  # fmt: skip
    saved = recommendation_attr({"recommended": row})
    assert saved is not None
    study.set_user_attr(RECOMMENDATION, saved)
    spec = spec_from_study(study, "sagemaker", image="img", catalog=_NoCatalog(),
                           output="s3://bucket/advisor")  # fmt: skip
    assert spec.instance_count == 2 and spec.instance_type == "ml.p4d.24xlarge"
    assert spec.machine_key == "sagemaker:ml.p4d.24xlarge:x2"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    request = SageMakerBackend(role="arn:aws:iam::123456789012:role/R").build_request(spec)
    assert request["TrainingJobDefinition"]["ResourceConfig"]["InstanceCount"] == 2
    client = boto3.client("sagemaker", region_name="us-east-1")
    arn = "arn:aws:sagemaker:us-east-1:123456789012:hyper-parameter-tuning-job/x"
    with Stubber(client) as stub:  # botocore validates the request
        stub.add_response("create_hyper_parameter_tuning_job",
                          {"HyperParameterTuningJobArn": arn}, request)  # fmt: skip
        client.create_hyper_parameter_tuning_job(**request)
        stub.assert_no_pending_responses()
