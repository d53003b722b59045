"""`advisor submit` starts from what the study learnt (issue #29): the short runs' narrowed
ranges, SageMaker's warm start from imported tuning jobs, and notes for what each service
does not take. The requests are the ones the real SDKs build and check."""

from __future__ import annotations

import json
import math
from typing import Any

import optuna
import pytest
from advisor.search_spaces.space import FloatParam
from click.testing import CliRunner
from short_runs import add_short_runs
from tuning_studies import PARAMS

from advisor.cli.main import cli
from advisor.errors import AdvisorError
from advisor.intervals import Interval
from advisor.records import ManagedRun, TrialRecord
from advisor.tuning.jobs import plan_job

pytestmark = pytest.mark.slow  # boto3/botocore, the cloud SDKs and an SQLite study: seconds each

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/advisor:1"


def tuned_study(storage: str, study_factory: Any, machine: str, parent: str | None = None) -> Any:
    study = study_factory(storage, machine=machine)
    add_short_runs(study, PARAMS)
    if parent:  # a SageMaker tuning job imported into the study (advisor import)
        managed = ManagedRun("sagemaker", parent, f"{parent}-001-abc", "val_accuracy", 0.9,
                             "completed", "ml.p3.2xlarge", 300.0)  # fmt: skip
        record = TrialRecord(
            machine="sagemaker:ml.p3.2xlarge", batch_size=512, source="managed",
            price_per_hour=3.825, spot=False, epochs=14, runtime=Interval(300, 300, 300),
            cost=Interval(0.32, 0.32, 0.32), managed=managed,
        )  # fmt: skip
        study.add_trial(optuna.trial.create_trial(value=300.0, user_attrs=record.to_attrs()))
    return study


def lr_of(spec: Any) -> FloatParam:
    lr = next(p for p in spec.hyperparameters if p.name == "lr")
    assert isinstance(lr, FloatParam)
    return lr


def test_sagemaker_starts_from_the_narrowed_ranges(storage: str, study_factory: Any) -> None:
    from advisor.providers.sagemaker import SageMakerBackend

    study = tuned_study(storage, study_factory, "sagemaker:ml.p3.2xlarge")
    spec = plan_job("sagemaker", study=study, image=IMAGE)
    lr = lr_of(spec)
    assert 0.01 <= lr.low < lr.high <= 0.3 and (lr.low, lr.high) != (0.01, 0.3)
    assert lr.low <= 0.05 <= lr.high  # the fake trainer's best learning rate
    request = SageMakerBackend().build_request(spec)  # checked against botocore's model
    ranges = request["HyperParameterTuningJobConfig"]["ParameterRanges"]
    got = next(r for r in ranges["ContinuousParameterRanges"] if r["Name"] == "lr")
    assert (float(got["MinValue"]), float(got["MaxValue"])) == (lr.low, lr.high)
    assert "WarmStartConfig" not in request
    notes = " | ".join(spec.notes)
    assert "warm start from" in notes and "lr 0.01..0.3 log ->" in notes
    assert "CreateHyperParameterTuningJob has no field for initial configurations" in notes
    assert "no WarmStartConfig" in notes


def test_an_imported_sagemaker_job_is_warm_started_from(storage: str, study_factory: Any) -> None:
    from advisor.providers.sagemaker import SageMakerBackend

    study = tuned_study(storage, study_factory, "sagemaker:ml.p3.2xlarge", "advisor-fcn-0101")
    spec = plan_job("sagemaker", study=study, image=IMAGE)
    assert spec.warm_start_parents == ("advisor-fcn-0101",)
    request = SageMakerBackend().build_request(spec)
    assert request["WarmStartConfig"] == {
        "ParentHyperParameterTuningJobs": [{"HyperParameterTuningJobName": "advisor-fcn-0101"}],
        "WarmStartType": "TransferLearning",
    }
    assert any(
        "TransferLearning from parent tuning job(s) advisor-fcn-0101" in n for n in spec.notes
    )


def test_the_sdk_tuner_carries_the_warm_start(
    storage: str, study_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor.providers.sagemaker import SageMakerBackend
    from moto import mock_aws

    for key, value in (
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("SAGEMAKER_VALIDATE_ROLE", "false"),
    ):
        monkeypatch.setenv(key, value)  # fmt: skip
    study = tuned_study(storage, study_factory, "sagemaker:ml.p3.2xlarge", "advisor-fcn-0101")
    spec = plan_job("sagemaker", study=study, image=IMAGE)
    with mock_aws():
        from sagemaker.core.helper.session_helper import Session

        backend = SageMakerBackend(role="arn:aws:iam::123456789012:role/R")
        tuner = backend.sdk_tuner(spec, session=Session())
    config = tuner.warm_start_config
    assert config.warm_start_type == "TransferLearning"
    assert [
        p.hyper_parameter_tuning_job_name for p in config.parent_hyper_parameter_tuning_jobs
    ] == ["advisor-fcn-0101"]


def test_vertex_gets_the_ranges_and_says_what_it_cannot_take(
    storage: str, study_factory: Any
) -> None:
    from advisor.providers.vertex import VertexBackend

    study = tuned_study(
        storage, study_factory, "vertex:n1-standard-8+1xT4", parent="advisor-fcn-0101"
    )
    spec = plan_job("vertex", study=study, image=IMAGE)
    assert spec.warm_start_parents == ()  # a SageMaker job is no Vertex parent
    lr = lr_of(spec)
    request = VertexBackend(project="p1").build_request(spec)
    params = request["studySpec"]["parameters"]
    got = next(p for p in params if p["parameterId"] == "lr")["doubleValueSpec"]
    assert (got["minValue"], got["maxValue"]) == (lr.low, lr.high)
    assert any("StudySpec takes no initial trials" in n for n in spec.notes)


def test_azure_gets_the_ranges_and_refuses_parent_jobs(
    storage: str, study_factory: Any, make_spec: Any
) -> None:
    from advisor.providers.azureml import AzureMLBackend

    study = tuned_study(storage, study_factory, "azure-ml:NC6s_v3")
    spec = plan_job("azureml", study=study, image=IMAGE, strategy="random")
    lr = lr_of(spec)
    body = AzureMLBackend(compute="gpu").build_request(spec)["properties"]
    kind, (low, high) = body["searchSpace"]["lr"]  # Azure's loguniform takes natural logs
    assert kind == "loguniform" and (low, high) == pytest.approx(
        (math.log(lr.low), math.log(lr.high))
    )
    assert any("sweep job takes no initial configurations" in n for n in spec.notes)
    with pytest.raises(AdvisorError, match="cannot warm-start"):
        AzureMLBackend(compute="gpu").build_request(make_spec(warm_start_parents=("job-1",)))


def test_a_study_without_short_runs_passes_the_space_on(storage: str, study_factory: Any) -> None:
    study = study_factory(storage, machine="sagemaker:ml.p3.2xlarge")
    spec = plan_job("sagemaker", study=study, image=IMAGE)
    assert lr_of(spec) == PARAMS[0] and not any("warm start" in n for n in spec.notes)


def test_submit_dry_run_shows_the_warm_start(storage: str, study_factory: Any) -> None:
    tuned_study(storage, study_factory, "sagemaker:ml.p3.2xlarge", "advisor-fcn-0101")
    result = CliRunner().invoke(
        cli, ["submit", "--provider", "sagemaker", "--study", "fcn-study", "--storage", storage,
              "--image", IMAGE, "--dry-run"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Note: warm start from" in result.stderr
    assert json.loads(result.stdout)["WarmStartConfig"]["WarmStartType"] == "TransferLearning"
