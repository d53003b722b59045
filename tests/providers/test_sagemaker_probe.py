"""SageMaker probe jobs: the request botocore's model accepts, the job's life on moto (the fake
service runs the exact container command the request carries, in SageMaker's layout, and
uploads model.tar.gz where SageMaker would), the cache and the ledger."""

from __future__ import annotations

import datetime as dt
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from advisor.probes.result import ProbeRequest
from advisor.providers.catalog import load
from advisor.providers.probe_jobs import RESULT_FILE, ProbeJobSpec
from advisor.providers.sagemaker_probe import SageMakerProbeJobRunner, read_result
from sagemaker_moto import OUTPUT, REGION, ROLE

from advisor.errors import AdvisorError
from advisor.evaluation.workload import WorkloadInfo
from advisor.remote.probe import probe_command, probe_request, remote_probe
from advisor.remote.settings import CloudSettings

FCN = WorkloadInfo(name="fcn", framework="torch", n_train=1)
SETTINGS = CloudSettings(
    image="123456789012.dkr.ecr.us-east-1.amazonaws.com/advisor:1",
    providers={"sagemaker": {"role": ROLE, "region": REGION, "output": OUTPUT}},
)


def _machine(key: str = "sagemaker:ml.g5.xlarge") -> Any:
    return load().get(key)


def _spec(**kw: Any) -> ProbeJobSpec:
    request = probe_request(FCN, 32, iterations=4)
    base: dict[str, Any] = dict(job_name="advisor-probe-fcn-b32-1", machine=_machine(),
                                image=SETTINGS.image, command=probe_command(request),
                                max_runtime_s=900, output=OUTPUT)  # fmt: skip
    base.update(kw)
    return ProbeJobSpec(**base)


def _runner(**kw: Any) -> SageMakerProbeJobRunner:
    base: dict[str, Any] = dict(role=ROLE, region=REGION, output=OUTPUT, poll_s=0.01)
    base.update(kw)
    return SageMakerProbeJobRunner(**base)


# -- the request ---------------------------------------------------------------------------


def test_the_request_is_what_botocore_accepts() -> None:
    import boto3
    from botocore.stub import Stubber

    spec = _spec(machine=_machine("ec2:g5.xlarge"), spot=True)
    request = _runner().build_request(spec)
    algo = request["AlgorithmSpecification"]
    assert algo["ContainerEntrypoint"] == ["python", "-m", "advisor.probes.job_entry"]
    assert algo["ContainerArguments"][0] == "--request"
    assert all(len(a) <= 256 for a in algo["ContainerArguments"])  # SageMaker's limit
    sent = json.loads("".join(algo["ContainerArguments"][1:]))
    assert sent["workload"] == "fcn" and sent["device"] == "auto" and sent["iterations"] == 4
    assert request["ResourceConfig"]["InstanceType"] == "ml.g5.xlarge"  # the EC2 row's twin
    assert request["StoppingCondition"] == {
        "MaxRuntimeInSeconds": 900,
        "MaxWaitTimeInSeconds": 1800,
    }
    assert request["EnableManagedSpotTraining"] is True
    client = boto3.client("sagemaker", region_name=REGION)
    with Stubber(client) as stub:  # botocore's own check of the request's shape
        stub.add_response("create_training_job", {"TrainingJobArn": "arn:x"}, request)
        client.create_training_job(**request)
        stub.assert_no_pending_responses()


def test_a_long_request_comes_in_pieces_the_model_accepts() -> None:
    request = probe_request(FCN, 32, hps={f"param_{i}": "x" * 40 for i in range(12)})
    command = probe_command(request)
    assert len(command) > 5 and all(len(a) <= 256 for a in command)
    _runner().build_request(_spec(command=command))  # validated: raises when rejected


def test_a_bad_value_is_refused_before_sending() -> None:
    with pytest.raises(AdvisorError, match="TrainingJobName"):
        _runner().build_request(_spec(job_name="bad_name!"))


def test_the_job_state_and_billed_time_are_read_from_describe_training_job() -> None:
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("sagemaker", region_name=REGION)
    t0 = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.timezone.utc)
    base = {"TrainingJobName": "j", "TrainingJobArn": "arn:aws:sagemaker:us-east-1:1:training-job/j",
            "ModelArtifacts": {"S3ModelArtifacts": "s3://b/j/output/model.tar.gz"},
            "AlgorithmSpecification": {"TrainingInputMode": "File"}, "CreationTime": t0,
            "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
            "StoppingCondition": {"MaxRuntimeInSeconds": 900}, "SecondaryStatus": "Starting"}  # fmt: skip
    runner = _runner(client=client)
    with Stubber(client) as stub:
        stub.add_response("describe_training_job", {**base, "TrainingJobStatus": "InProgress"})
        started = {**base, "TrainingJobStatus": "Completed",
                   "TrainingStartTime": t0 + dt.timedelta(seconds=125),
                   "TrainingEndTime": t0 + dt.timedelta(seconds=312), "BillableTimeInSeconds": 187}  # fmt: skip
        stub.add_response("describe_training_job", started)
        pending, done = runner._poll("j"), runner._poll("j")
    assert pending.state == "pending" and pending.started_at is None
    assert done.state == "completed" and done.billed_s == 187
    assert done.billed_source == "BillableTimeInSeconds"
    assert done.ended_at - done.created_at == pytest.approx(312)  # type: ignore[operator]


def test_past_its_time_limit_the_job_is_stopped() -> None:
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("sagemaker", region_name=REGION)
    sts = boto3.client("sts", region_name=REGION)
    now = [1000.0]

    def clock() -> float:
        now[0] += 400.0  # each look is 400 s later
        return now[0]

    runner = _runner(client=client, sts=sts, clock=clock)
    runner.START_ALLOWANCE_S = 100.0  # type: ignore[misc]
    spec = _spec(max_runtime_s=600)
    running = {"TrainingJobName": spec.job_name, "TrainingJobArn": "arn:x/j",
               "TrainingJobStatus": "InProgress", "SecondaryStatus": "Training",
               "ModelArtifacts": {"S3ModelArtifacts": "s3://b/j"},
               "AlgorithmSpecification": {"TrainingInputMode": "File"},
               "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
               "StoppingCondition": {"MaxRuntimeInSeconds": 600},
               "CreationTime": dt.datetime(2026, 11, 22, tzinfo=dt.timezone.utc),
               "TrainingStartTime": dt.datetime(2026, 11, 22, 0, 1, tzinfo=dt.timezone.utc)}  # fmt: skip
    with Stubber(client) as stub, Stubber(sts) as sts_stub:
        sts_stub.add_response("get_caller_identity", {"Arn": ROLE, "Account": "123456789012"})
        stub.add_response("create_training_job", {"TrainingJobArn": "arn:x/j"},
                          runner.build_request(spec))  # fmt: skip
        for _ in range(2):  # looks at 1800 s and 2200 s; the limit is 1400 + 600 + 100 s
            stub.add_response("describe_training_job", running)
        stub.add_response("stop_training_job", {}, {"TrainingJobName": spec.job_name})
        out = runner.run(spec)
        stub.assert_no_pending_responses()  # StopTrainingJob was sent
    assert out.state == "timeout" and out.result_text is None and "stopped" in (out.error or "")


def test_no_role_or_output_is_one_line() -> None:
    with pytest.raises(AdvisorError, match=r"need an execution role.*--role") as exc:
        _runner(role=None).check()
    assert "\n" not in str(exc.value)
    with pytest.raises(AdvisorError, match=r"s3:// output location.*--output"):
        _runner(output="gs://wrong").check()
    with pytest.raises(AdvisorError, match=r"not configured.*--role \.\.\. --output"):
        remote_probe(FCN, _machine(), 32, storage=None, settings=CloudSettings())


def test_no_credentials_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    import boto3

    # boto3's default session keeps the credentials an earlier test's moto gave it
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    with pytest.raises(AdvisorError, match=r"No AWS credentials found.*aws configure"):
        _runner().check()


def test_the_result_is_read_out_of_model_tar_gz() -> None:
    assert read_result(_tar({f"./{RESULT_FILE}": b'{"a": 1}', "./other": b"x"})) == '{"a": 1}'
    assert read_result(_tar({"./other": b"x"})) is None
    with pytest.raises(AdvisorError, match="cannot be read"):
        read_result(b"not a tar")


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# -- the whole path on moto ------------------------------------------------------------------


@pytest.mark.slow
def test_remote_probe_on_moto_is_measured_cached_and_corrects_the_next_prediction(
    sagemaker_on_moto: list[str], _advisor_home: Path
) -> None:
    from advisor.probes.runner import run_probe

    from advisor.prediction.timing.model import predict

    catalog = load()
    machine = catalog.get("sagemaker:ml.g5.xlarge")
    storage = f"sqlite:///{_advisor_home / 'studies.db'}"
    local = run_probe(ProbeRequest(workload="fcn", batch_size=32, iterations=4, threads=1,
                                   gradient_noise=False))  # this machine's probe  # fmt: skip
    assert local.ok
    before = predict(local, machine, catalog, 32, ledger_storage=storage)
    assert before.calibration_points == 0
    statuses: list[str] = []
    probe = remote_probe(FCN, machine, 32, storage=storage, settings=SETTINGS,
                         runner=_runner(), iterations=4, local_probe=local, catalog=catalog,
                         on_status=statuses.append)  # fmt: skip
    assert sagemaker_on_moto == [probe.job_info["job_id"]]
    assert probe.source == "measured" and not probe.emulated and not probe.cached
    assert probe.result.ok and len(probe.result.iteration_s) == 4
    job = probe.job_info
    assert job["service"] == "sagemaker" and job["billed_source"] == "BillableTimeInSeconds"
    # wall and start-up are the service's timestamps' differences, not the local clock's
    import boto3

    desc = boto3.client("sagemaker", region_name=REGION).describe_training_job(
        TrainingJobName=job["job_id"]
    )
    created, ended = desc["CreationTime"], desc["TrainingEndTime"]
    assert job["wall_s"] == pytest.approx((ended - created).total_seconds(), abs=1e-3)
    started = (desc["TrainingStartTime"] - created).total_seconds()
    assert job["before_start_s"] == pytest.approx(started, abs=1e-3)
    assert job["billed_s"] == desc["BillableTimeInSeconds"]
    assert job["cost_usd"] == pytest.approx(job["billed_s"] / 3600 * machine.on_demand_usd_per_h)
    assert statuses and statuses[-1].startswith(f"{job['job_id']}: completed, ")

    # The ledger: the next prediction for this machine is corrected by the measurement.
    assert probe.calibration is not None and probe.calibration > 0
    after = predict(local, machine, catalog, 32, ledger_storage=storage)
    assert after.calibration_points == 1
    assert after.calibration == pytest.approx(probe.calibration)
    assert after.phases.t2.value == pytest.approx(before.phases.t2.value * probe.calibration)
    print(f"g5 t2 predicted {before.phases.t2.value:.4g} s, measured (on moto's runner) "
          f"x{probe.calibration:.3g} -> corrected {after.phases.t2.value:.4g} s")  # fmt: skip

    # Cached: a second call starts no job and records nothing new.
    again = remote_probe(FCN, machine, 32, storage=storage, settings=SETTINGS,
                         runner=_runner(), iterations=4, local_probe=local)  # fmt: skip
    assert again.cached and sagemaker_on_moto == [probe.job_info["job_id"]]
    assert again.result == probe.result and again.job_info["billed_s"] == job["billed_s"]
    assert predict(local, machine, catalog, 32, ledger_storage=storage).calibration_points == 1


def test_a_job_without_a_result_file_is_a_failed_probe_and_cached_as_transient(
    monkeypatch: pytest.MonkeyPatch, _advisor_home: Path
) -> None:
    """On moto (which completes a job at once and uploads nothing): no model.tar.gz."""
    import boto3
    from moto import mock_aws

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    storage = f"sqlite:///{_advisor_home / 'studies.db'}"
    with mock_aws():
        boto3.client("s3", region_name=REGION).create_bucket(Bucket="advisor-probes")
        t0 = __import__("time").time()
        probe = remote_probe(FCN, _machine(), 32, storage=storage, settings=SETTINGS,
                             runner=_runner(), iterations=4)  # fmt: skip
        assert not probe.result.ok and probe.result.status == "error"
        assert "wrote no result file" in probe.result.reason
        # Reused by a caller that started before it was written, retried by a later one.
        from advisor.remote.probe import cached_remote_probe

        assert cached_remote_probe(storage, FCN, _machine().key, 32, iterations=4, since=t0)
        assert cached_remote_probe(storage, FCN, _machine().key, 32, iterations=4) is None
