"""SageMaker: requests validated by botocore's Stubber and our model check; moto flow."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from advisor.providers.sagemaker import SageMakerBackend
from advisor.providers.tuning import METRIC_LINE

from advisor.errors import AdvisorError

pytestmark = pytest.mark.slow  # imports boto3/botocore models (about 1 s)

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "sEcReT-should-never-show")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def _stubbed(request: dict[str, Any]) -> dict[str, Any]:
    """Send ``request`` through a Stubber-wrapped client: botocore validates it."""
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("sagemaker", region_name="us-east-1")
    arn = "arn:aws:sagemaker:us-east-1:123456789012:hyper-parameter-tuning-job/x"
    with Stubber(client) as stub:
        stub.add_response(
            "create_hyper_parameter_tuning_job", {"HyperParameterTuningJobArn": arn}, request
        )
        out: dict[str, Any] = client.create_hyper_parameter_tuning_job(**request)
        stub.assert_no_pending_responses()
    return out


def test_bayesian_request_passes_stubber(aws_env: None, make_spec: Any) -> None:
    request = SageMakerBackend(role=ROLE).build_request(make_spec())
    assert _stubbed(request)["HyperParameterTuningJobArn"].endswith("/x")
    config = request["HyperParameterTuningJobConfig"]
    assert config["Strategy"] == "Bayesian"
    assert config["ResourceLimits"] == {"MaxParallelTrainingJobs": 3, "MaxNumberOfTrainingJobs": 12}
    ranges = config["ParameterRanges"]
    assert ranges["ContinuousParameterRanges"][0] == {
        "Name": "lr", "MinValue": "0.01", "MaxValue": "0.3", "ScalingType": "Logarithmic"
    }  # fmt: skip
    assert ranges["IntegerParameterRanges"][0]["ScalingType"] == "Linear"
    assert ranges["CategoricalParameterRanges"][0]["Values"] == ["sgd", "adam"]
    definition = request["TrainingJobDefinition"]
    assert definition["ResourceConfig"]["InstanceType"] == "ml.p3.2xlarge"
    assert definition["StaticHyperParameters"] == {
        "model": "fcn", "batch_size": "512", "epochs": "14", "metric": "val_accuracy",
        "device": "cuda",  # a V100 machine: every trial trains on its GPU
    }  # fmt: skip
    # The metric regex in the request reads the line the entry point prints.
    regex = definition["AlgorithmSpecification"]["MetricDefinitions"][0]["Regex"]
    line = METRIC_LINE.format(name="val_accuracy", value=0.8765)
    assert float(re.search(regex, line).group(1)) == pytest.approx(0.8765)  # type: ignore[union-attr]
    # ... and the measured step time, for the calibration ledger (not an objective).
    names = [d["Name"] for d in definition["AlgorithmSpecification"]["MetricDefinitions"]]
    assert names == ["val_accuracy", "step_s"]
    assert config["HyperParameterTuningJobObjective"]["MetricName"] == "val_accuracy"


def test_hyperband_spot_request_passes_stubber(aws_env: None, make_spec: Any) -> None:
    spec = make_spec(strategy="hyperband", spot=True)
    request = SageMakerBackend(role=ROLE).build_request(spec)
    _stubbed(request)
    config = request["HyperParameterTuningJobConfig"]
    assert config["StrategyConfig"] == {
        "HyperbandStrategyConfig": {"MinResource": 1, "MaxResource": 14}
    }
    assert config["TrainingJobEarlyStoppingType"] == "Off"
    definition = request["TrainingJobDefinition"]
    assert definition["EnableManagedSpotTraining"] is True
    assert (
        definition["StoppingCondition"]["MaxWaitTimeInSeconds"]
        >= (definition["StoppingCondition"]["MaxRuntimeInSeconds"])
    )
    assert definition["CheckpointConfig"]["S3Uri"] == "s3://bucket/advisor/checkpoints"


def test_fallback_instance_types_pass_stubber(aws_env: None, make_spec: Any) -> None:
    spec = make_spec(alternative_instance_types=("ml.g5.2xlarge",))
    request = SageMakerBackend(role=ROLE).build_request(spec)
    _stubbed(request)
    configs = request["TrainingJobDefinition"]["HyperParameterTuningResourceConfig"]
    assert [c["InstanceType"] for c in configs["InstanceConfigs"]] == [
        "ml.p3.2xlarge",
        "ml.g5.2xlarge",
    ]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"instance_type": "ml.p3.3xlarge"}, "InstanceType='ml.p3.3xlarge' is not a valid value"),
        ({"job_name": "advisor-fcn-" + "x" * 30}, "longer than 32"),
        ({"job_name": "advisor_fcn"}, "does not match"),
    ],
)
def test_enum_length_and_pattern_are_checked_before_sending(
    make_spec: Any, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(AdvisorError, match=message):
        SageMakerBackend(role=ROLE).build_request(make_spec(**overrides))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"parallel_trials": 11, "max_trials": 20}, "at most 10 trials in parallel"),
        ({"strategy": "grid"}, "grid search takes only categorical"),
        ({"strategy": "hyperband", "early_stopping": True}, "Hyperband stops poor trials"),
    ],
)
def test_refusals(make_spec: Any, overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(AdvisorError, match=message) as info:
        SageMakerBackend(role=ROLE).build_request(make_spec(**overrides))
    assert "To fix:" in str(info.value)


def test_submit_status_import_against_moto(
    aws_env: None, storage: str, study_factory: Any, tmp_path: Any
) -> None:
    import optuna
    from click.testing import CliRunner
    from moto import mock_aws
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sagemaker.models import sagemaker_backends

    from advisor.cli.main import cli

    study_factory(storage)
    _cache_local_probe(storage, 512)  # as `advisor suggest` leaves it: the ledger needs it
    runner = CliRunner()
    common = ["--provider", "sagemaker", "--region", "us-east-1"]
    with mock_aws():
        submitted = runner.invoke(
            cli,
            ["submit", *common, "--study", "fcn-study", "--storage", storage, "--role", ROLE,
             "--image", "img:1", "--job-name", "advisor-fcn-moto", "--max-trials", "4", "--json"],
        )  # fmt: skip
        assert submitted.exit_code == 0, submitted.output
        sub = json.loads(submitted.stdout)
        assert sub["job_id"] == "advisor-fcn-moto"
        assert "arn:aws:sts::123456789012" in sub["identity"]
        # The default output bucket is the account's SageMaker bucket.
        out = sub["request"]["TrainingJobDefinition"]["OutputDataConfig"]["S3OutputPath"]
        assert out == "s3://sagemaker-us-east-1-123456789012/advisor"

        # What SageMaker would do: run training jobs named after the tuning job.
        import boto3

        sm = boto3.client("sagemaker", region_name="us-east-1")
        definition = sub["request"]["TrainingJobDefinition"]
        chosen = [(0.05, "sgd", 0.91, 40), (0.2, "adam", 0.87, 55)]
        backend = sagemaker_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        for i, (lr, opt, acc, width) in enumerate(chosen):
            name = f"advisor-fcn-moto-{i + 1:03d}-abcd1234"
            sm.create_training_job(
                TrainingJobName=name,
                HyperParameters={**definition["StaticHyperParameters"], "lr": str(lr),
                                 "optimizer": opt, "momentum": "0.9", "width": str(width)},
                AlgorithmSpecification={"TrainingImage": "img:1", "TrainingInputMode": "File"},
                RoleArn=ROLE,
                OutputDataConfig=definition["OutputDataConfig"],
                ResourceConfig={"InstanceType": "ml.p3.2xlarge", "InstanceCount": 1,
                                "VolumeSizeInGB": 30},
                StoppingCondition={"MaxRuntimeInSeconds": 3600},
            )  # fmt: skip
            backend.training_jobs[name].final_metric_data_list = [
                {"MetricName": "val_accuracy", "Value": acc},
                {"MetricName": "step_s", "Value": 0.002 * (i + 1)},  # measured, per step
            ]
        sm.create_training_job(  # an unrelated job that must not be imported
            TrainingJobName="someone-else-001",
            AlgorithmSpecification={"TrainingImage": "img:1", "TrainingInputMode": "File"},
            RoleArn=ROLE,
            OutputDataConfig=definition["OutputDataConfig"],
            ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 5},
            StoppingCondition={"MaxRuntimeInSeconds": 60},
        )

        status = runner.invoke(cli, ["status", "advisor-fcn-moto", *common, "--json"])
        assert status.exit_code == 0, status.output
        assert json.loads(status.stdout)["state"] == "Completed"

        imported = runner.invoke(
            cli, ["import", "advisor-fcn-moto", *common, "--study", "fcn-study",
                  "--storage", storage],
        )  # fmt: skip
        assert imported.exit_code == 0, imported.output
        assert "Added 2 of 2 trials of advisor-fcn-moto" in imported.output
        # Both measured step times went to the ledger next to the model's prediction.
        assert "2 trial(s) recorded in the calibration ledger (advisor calibration)." in (
            imported.output
        )
        again = runner.invoke(
            cli, ["import", "advisor-fcn-moto", *common, "--study", "fcn-study",
                  "--storage", storage, "--json"],
        )  # fmt: skip
        assert json.loads(again.stdout)["trials_added"] == []

    study = optuna.load_study(study_name="fcn-study", storage=storage)
    managed = [t for t in study.trials if t.user_attrs.get("source") == "managed"]
    assert len(managed) == 2
    by_job = {t.user_attrs["managed_job"]: t for t in managed}
    first = by_job["advisor-fcn-moto-001-abcd1234"]
    assert first.params["lr"] == pytest.approx(0.05)
    assert first.params["optimizer"] == "sgd"
    assert first.params["width"] == 40
    assert first.params["machine"] == "sagemaker:ml.p3.2xlarge"
    assert first.params["batch_size"] == 512
    assert first.user_attrs["managed_metric"] == {"name": "val_accuracy", "value": 0.91}
    assert first.user_attrs["tuning_job"] == "advisor-fcn-moto"
    assert first.values is not None and first.values[0] >= 0.0
    listed = runner.invoke(cli, ["calibration", "--storage", storage, "--json"])
    assert listed.exit_code == 0, listed.output
    ledger = json.loads(listed.stdout)
    assert sorted((r["origin"], r["machine"], r["batch_size"], r["measured_t2"])
                  for r in ledger["records"]) == [
        ("tuning-trial", "sagemaker:ml.p3.2xlarge", 512, 0.002),
        ("tuning-trial", "sagemaker:ml.p3.2xlarge", 512, 0.004),
    ]  # fmt: skip
    assert [(c["device_class"], c["points"]) for c in ledger["corrections"]] == [("V100", 2)]
    # Credentials never reach the study.
    dump = json.dumps([study.user_attrs, *[t.user_attrs for t in study.trials]], default=str)
    assert "sEcReT" not in dump and "testing" not in dump
    assert "sEcReT" not in submitted.output + status.output + imported.output


def test_missing_credentials_is_one_line(
    monkeypatch: pytest.MonkeyPatch, make_spec: Any, tmp_path: Any
) -> None:
    import boto3

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    sts = boto3.session.Session().client("sts", region_name="us-east-1")
    with pytest.raises(AdvisorError, match=r"No AWS credentials found.*aws configure"):
        SageMakerBackend(role=ROLE, sts=sts, region="us-east-1").submit(make_spec())


def _cache_local_probe(storage: str, batch_size: int) -> None:
    """A real probe of fcn on this machine, in the study storage's probe cache."""
    from advisor.probes.result import ProbeRequest
    from advisor.probes.runner import run_probe

    from advisor.evaluation.local import ProbeCache, probe_cache_key
    from advisor.evaluation.workload import WorkloadInfo

    probe = run_probe(ProbeRequest(workload="fcn", batch_size=batch_size, iterations=4,
                                   threads=1, gradient_noise=False))  # fmt: skip
    assert probe.ok, probe.error
    key = probe_cache_key(WorkloadInfo(name="fcn", framework="torch", n_train=1), batch_size,
                          1, 4, {})  # fmt: skip
    ProbeCache(storage).put(key, probe)


def test_the_sagemaker_sdk_tuner_submits_the_same_job(
    aws_env: None, make_spec: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from moto import mock_aws

    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")
    spec = make_spec(job_name="advisor-fcn-sdk", output="s3://advisor-bucket/advisor")
    backend = SageMakerBackend(role=ROLE)
    with mock_aws():
        from sagemaker.core.helper.session_helper import Session

        boto3.client("s3").create_bucket(Bucket="advisor-bucket")
        backend.sdk_tuner(spec, session=Session()).tune(wait=False)
        sm = boto3.client("sagemaker")
        (job,) = sm.list_hyper_parameter_tuning_jobs()["HyperParameterTuningJobSummaries"]
        sent = sm.describe_hyper_parameter_tuning_job(
            HyperParameterTuningJobName=job["HyperParameterTuningJobName"]
        )
    ours = backend.build_request(spec)
    assert job["HyperParameterTuningJobName"].startswith("advisor-fcn-sdk")
    assert (
        sent["HyperParameterTuningJobConfig"]["ParameterRanges"]
        == ours["HyperParameterTuningJobConfig"]["ParameterRanges"]
    )
    definition = sent["TrainingJobDefinition"]
    assert (
        definition["StaticHyperParameters"]
        == (ours["TrainingJobDefinition"]["StaticHyperParameters"])
    )
    assert (
        definition["AlgorithmSpecification"]["MetricDefinitions"]
        == (ours["TrainingJobDefinition"]["AlgorithmSpecification"]["MetricDefinitions"])
    )
