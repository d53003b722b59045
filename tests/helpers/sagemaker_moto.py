"""moto's SageMaker and S3 for the remote-probe tests (``sagemaker_on_moto``, a fixture
registered in ``tests/conftest.py``): CreateTrainingJob runs the request's exact container
command here, in SageMaker's layout, and uploads ``/opt/ml/model`` where SageMaker would."""

from __future__ import annotations

import datetime as dt
import io
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from advisor.providers.catalog import load
from advisor.providers.probe_jobs import ProbeJobSpec
from advisor.providers.probe_jobs_local import LocalJobRunner

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
OUTPUT = "s3://advisor-probes/jobs"
REGION = "us-east-1"


@pytest.fixture
def sagemaker_on_moto(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[str]]:
    """moto's SageMaker and S3, whose CreateTrainingJob runs the job: the request's exact
    ContainerEntrypoint + ContainerArguments in SageMaker's layout here (LocalJobRunner), then
    /opt/ml/model as <S3OutputPath>/<job>/output/model.tar.gz, and the job's real times."""
    import boto3
    from moto import mock_aws
    from moto.sagemaker.models import SageMakerModelBackend

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    started: list[str] = []
    original = SageMakerModelBackend.create_training_job

    def create_and_run(self: Any, training_job_name: str, **kw: Any) -> Any:
        job = original(self, training_job_name, **kw)
        algo = kw["algorithm_specification"]
        command = (*algo["ContainerEntrypoint"], *algo.get("ContainerArguments", []))
        local = LocalJobRunner("sagemaker", workdir=tmp_path / "service")
        machine = load().resolve(kw["resource_config"]["InstanceType"])
        out = local.run(ProbeJobSpec(training_job_name, machine, algo["TrainingImage"],
                                     tuple(command), kw["stopping_condition"]["MaxRuntimeInSeconds"]))  # fmt: skip
        model = local.folder(out.job_id) / "opt_ml" / "model"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(model, arcname=".")
        bucket, _, prefix = (
            kw["output_data_config"]["S3OutputPath"].removeprefix("s3://").partition("/")
        )
        boto3.client("s3", region_name=REGION).put_object(
            Bucket=bucket, Key=f"{prefix}/{training_job_name}/output/model.tar.gz", Body=buf.getvalue())  # fmt: skip
        start = job.creation_time
        job.training_start_time = start + dt.timedelta(seconds=90)  # provisioning
        job.training_end_time = job.training_start_time + dt.timedelta(seconds=out.wall_s)
        job.billable_time_in_seconds = max(1, round(out.wall_s))
        job.training_job_status = "Completed" if out.state == "completed" else "Failed"
        started.append(training_job_name)
        return job

    monkeypatch.setattr(SageMakerModelBackend, "create_training_job", create_and_run)
    with mock_aws():
        boto3.client("s3", region_name=REGION).create_bucket(Bucket="advisor-probes")
        yield started
