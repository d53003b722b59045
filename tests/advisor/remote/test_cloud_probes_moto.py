"""`advisor suggest --model fcn --budget 5 --cloud-probes 3` end to end against moto (issue #14's
done-when): the real ``SageMakerProbeJobRunner`` (no emulation flag) sends CreateTrainingJob
through boto3 to moto's SageMaker, polls DescribeTrainingJob and fetches each job's
``model.tar.gz`` from moto's S3; the report lists the jobs and marks the measured machines.

moto's CreateTrainingJob is patched (``tests/helpers/sagemaker_moto.py``'s
``sagemaker_on_moto``) to run the request's exact container command here in SageMaker's layout
and upload ``/opt/ml/model`` where SageMaker would: the timings are THIS CPU's, not the named
GPU's. What the test checks is the path (request, polling, billed seconds, S3 fetch, cache,
ledger, report), not the numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sagemaker_moto import OUTPUT, REGION, ROLE

from advisor.cli.main import cli

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/advisor:1"
PROBE_BUDGET = 1.0
ITERATIONS = 3
ENTRY = ["python", "-m", "advisor.probes.job_entry"]
# AWS machines on demand: one-device GPU boxes of four accelerator types (EC2 rows, whose jobs
# run as their SageMaker twins, and a SageMaker row), a CPU box, and multi-GPU boxes that rank
# among the fastest, so that "one-device machines only" can fail. Ten machines x four batch
# sizes + this machine's rows fit in the report's 50 ranking rows. The batch sizes are small
# ones: the local probes before the jobs time each (b1024 and b2048 took 20 of the test's 70
# CPU seconds), and what is checked is the path, not the numbers.
# These probes are not emulated, so they write ledger entries (this CPU's times under the GPU's
# name): the storage is the default SQLite file in the test's own ADVISOR_HOME (conftest's
# autouse ``_advisor_home``), so no other test's ledger sees them.
MACHINES = [
    "ec2:g5.xlarge", "ec2:g4dn.xlarge", "ec2:g6.xlarge", "ec2:p3.2xlarge",
    "sagemaker:ml.g5.xlarge", "ec2:c5.2xlarge", "ec2:g5.12xlarge", "ec2:p3.8xlarge",
    "ec2:p3.16xlarge", "sagemaker:ml.g6.12xlarge",
]  # fmt: skip
SPACE = (
    "workload: fcn\n"
    f"machines: {{instance_types: [{', '.join(MACHINES)}], spot: false}}\n"
    "batch_sizes: [64, 128, 256, 512]\n"
    "hyperparameters:\n  lr: {type: float, low: 0.01, high: 0.3, log: true}\n"
)


def _suggest(tmp_path: Path, *extra: str) -> Any:
    args = [
        "suggest", "--model", "fcn", "--budget", "5", "--cloud-probes", "3",
        "--space", str(tmp_path / "space.yaml"), "--probe-budget", str(PROBE_BUDGET),
        "--probe-iterations", str(ITERATIONS), "--trials", "2", *extra,
    ]  # fmt: skip
    # In-process (CliRunner), so that moto's patching of botocore applies to the CLI's clients.
    return CliRunner().invoke(cli, args, env={"COLUMNS": "220"})


@pytest.mark.slow
def test_suggest_cloud_probes_runs_sagemaker_jobs_on_moto_and_reports_them_measured(
    sagemaker_on_moto: list[str], _advisor_home: Path, tmp_path: Path
) -> None:
    import boto3
    from advisor.probes.result import ProbeResult
    from advisor.providers.catalog import load
    from advisor.providers.sagemaker_probe import SageMakerProbeJobRunner, read_result

    from advisor.options import SuggestOptions, workload_info
    from advisor.prediction.run.iteration_model import phase_times
    from advisor.remote.probe import job_machine

    (tmp_path / "space.yaml").write_text(SPACE)
    _advisor_home.mkdir(parents=True, exist_ok=True)
    (_advisor_home / "cloud.yaml").write_text(  # $ADVISOR_HOME/cloud.yaml, no --cloud-config
        f"image: {IMAGE}\nsagemaker: {{role: '{ROLE}', region: {REGION}, output: '{OUTPUT}'}}\n"
    )
    result = _suggest(tmp_path, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    cloud = report["cloud_probes"]
    jobs = cloud["jobs"]
    assert len(jobs) == 3 and cloud["new"] == 3 and cloud["skipped"] == [], cloud
    assert cloud["stop_reason"] == "probed 3 machine(s)"

    # Three CreateTrainingJob requests reached moto through boto3 (botocore validated them on
    # the way out, moto accepted them), one per job in the report, in that order.
    assert sagemaker_on_moto == [j["job_id"] for j in jobs]
    sm = boto3.client("sagemaker", region_name=REGION)
    s3 = boto3.client("s3", region_name=REGION)
    listed = sm.list_training_jobs()["TrainingJobSummaries"]
    assert sorted(t["TrainingJobName"] for t in listed) == sorted(sagemaker_on_moto)

    catalog = load()
    workload = workload_info(SuggestOptions(model="fcn"))
    for j in jobs:
        inst = catalog.get(j["machine"])
        # The step probes one-device machines only (a probe times one device).
        assert inst.accelerator_count <= 1, j["machine"]
        desc = sm.describe_training_job(TrainingJobName=j["job_id"])
        algo = desc["AlgorithmSpecification"]
        assert algo["TrainingImage"] == IMAGE and algo["ContainerEntrypoint"] == ENTRY
        sent = json.loads("".join(algo["ContainerArguments"][1:]))
        assert sent["workload"] == "fcn" and sent["batch_size"] == j["batch_size"]
        assert sent["iterations"] == ITERATIONS and sent["device"] == "auto"
        assert desc["RoleArn"] == ROLE and desc["OutputDataConfig"]["S3OutputPath"] == OUTPUT
        row = job_machine(inst, catalog)  # an EC2 row's job runs (and bills) as its SageMaker twin
        assert row.service == "sagemaker"
        itype = SageMakerProbeJobRunner.instance_type(inst)
        assert itype == row.instance_type
        assert desc["ResourceConfig"] == {"InstanceType": itype, "InstanceCount": 1,
                                          "VolumeSizeInGB": 30}  # fmt: skip
        # Billed seconds and cost come from DescribeTrainingJob, at the SageMaker price.
        assert j["service"] == "sagemaker" and j["state"] == "completed"
        assert j["emulated"] is False and j["cached"] is False and j["measured"] is True
        assert j["billed_source"] == "BillableTimeInSeconds"
        assert j["billed_s"] == desc["BillableTimeInSeconds"]
        assert j["price_per_hour"] == row.on_demand_usd_per_h
        assert j["cost_usd"] == pytest.approx(j["billed_s"] * row.on_demand_usd_per_h / 3600)
        assert j["charged_usd"] == pytest.approx(j["cost_usd"])
        # Wall time and the job's own start-up (issue #27) are read from the service's
        # timestamps: CreationTime -> TrainingStartTime -> TrainingEndTime.
        created, began = desc["CreationTime"], desc["TrainingStartTime"]
        ended = desc["TrainingEndTime"]
        assert j["wall_s"] == pytest.approx((ended - created).total_seconds(), abs=1e-3)
        assert j["before_start_s"] == pytest.approx((began - created).total_seconds(), abs=1e-3)
        assert j["on_machine_s"] == pytest.approx((ended - began).total_seconds(), abs=1e-3)
        # The measurement is the result file fetched from the job's model.tar.gz in S3.
        key = f"{OUTPUT.removeprefix('s3://advisor-probes/')}/{j['job_id']}/output/model.tar.gz"
        text = read_result(s3.get_object(Bucket="advisor-probes", Key=key)["Body"].read())
        assert text is not None
        fetched = ProbeResult.from_json(text)
        assert fetched.ok and fetched.workload == "fcn" and fetched.batch_size == j["batch_size"]
        assert len(fetched.iteration_s) == ITERATIONS
        step = phase_times(fetched, workload.n_train, workload.n_val).t2.value
        assert j["measured_step_s"] == pytest.approx(step)
        assert j["ratio"] == pytest.approx(step / j["predicted_step_s"])

    # The ranking marks exactly the probed (machine, batch) pairs as measured by a remote
    # probe -- not emulated: they went through SageMaker's API. (moto ran the container here,
    # so the timings themselves are this CPU's, not the named GPU's.)
    probed = {(j["machine"], j["batch_size"]) for j in jobs}
    rows = report["ranking"]
    assert len(rows) == len(MACHINES) * 4 + 4  # every row is in the report (under 50)
    for r in rows:
        pair = (r["machine"], r["batch_size"])
        if r["service"] == "local":
            assert r["known"] == "here"
        elif pair in probed:
            assert r["known"] == "probed", r
            assert r["record_source"].startswith("measured (remote probe)"), r
            # issue #27: a few iterations timed there, the run extrapolated
            assert r["source"].split(", screen only")[0] == "probed on the machine, extrapolated"
        else:
            assert r["known"] == "model", r
    assert {(r["machine"], r["batch_size"]) for r in rows if r["known"] == "probed"} == probed
    assert not any(r["known"] == "emulated" for r in rows)
    assert any(r["gpus"] > 1 and r["feasible"] for r in rows)  # there were multi-GPU rivals

    # Spend: the jobs' real charge, within --probe-budget; issue #27: the trials (modelled,
    # or at a probed machine and batch) charged nothing on top.
    probes = report["probes"]
    assert probes["budget_usd"] == PROBE_BUDGET
    assert cloud["spent_usd"] == pytest.approx(sum(j["charged_usd"] for j in jobs), abs=1e-6)
    assert 0 < cloud["spent_usd"] == pytest.approx(probes["spent_usd"], abs=1e-6)
    assert probes["spent_usd"] <= PROBE_BUDGET + 1e-9
    assert all(r["charged_usd"] == 0 for r in rows if r["trial"] is not None)

    # The same command again starts no job: the study's record and the cache answer.
    # One line of it in the one-screen report, each job with --verbose.
    again = _suggest(tmp_path, "--top", "50")
    assert again.exit_code == 0, again.output
    assert "cloud probes (--cloud-probes 3): 3 job(s) (0 new)" in again.stdout
    assert "emulated here" not in again.stdout
    verbose = _suggest(tmp_path, "--top", "50", "--verbose")
    assert verbose.exit_code == 0, verbose.output
    assert sagemaker_on_moto == [j["job_id"] for j in jobs]
    assert len(sm.list_training_jobs()["TrainingJobSummaries"]) == 3
    out = " ".join(verbose.stdout.split())  # lines wrapped at the piped width joined
    assert "cloud probes: 3 job(s) (0 new)" in out and "already probed 3 machine(s)" in out
    assert "probed = probed on the machine, extrapolated: a few iterations timed there" in out
    assert "emulated here" not in out
