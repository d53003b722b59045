"""`advisor probe --on MACHINE`, cloud.yaml, and the emulated (local) back end end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from repo_paths import ROOT

from advisor.cli.main import cli
from advisor.cli.probe_remote import cost_line
from advisor.errors import AdvisorError
from advisor.remote.settings import CloudSettings

PROBE = ["probe", "--model", "fcn", "--batch-size", "32", "--iterations", "4"]


@pytest.mark.slow
def test_probe_on_emulated_end_to_end_then_cached(_advisor_home: Path) -> None:
    args = [sys.executable, "-m", "advisor.cli.main", *PROBE, "--on", "sagemaker:ml.g5.xlarge",
            "--emulate", "--json"]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    data = json.loads(lines[0])
    assert data["machine"] == "sagemaker:ml.g5.xlarge" and data["source"] == "emulated"
    assert data["job"]["service"] == "local" and data["job"]["state"] == "completed"
    assert data["job"]["billed_source"].startswith("emulated on this machine as sagemaker")
    assert data["result"]["status"] == "ok" and len(data["result"]["iteration_s"]) == 4
    assert data["result"]["fingerprint"]["remote_job"]["layout"] == "sagemaker"
    assert data["cached"] is False and data["calibration"] is None
    assert "completed" in proc.stderr  # the job's status line

    again = subprocess.run([*args[:-1]], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "emulated on this machine as sagemaker:ml.g5.xlarge" in again.stdout
    assert "cached, no job started" in again.stdout and data["job"]["job_id"] in again.stdout
    assert "t2 (steady, median)" in again.stdout  # the phases, as a local probe prints them


@pytest.mark.parametrize(
    ("on", "says"),
    [
        ("ml.g5.xlarj", "Unknown instance type 'ml.g5.xlarj'"),
        ("local", "probe it locally with `advisor probe`"),
        ("ml.g5.xlarge", "SageMaker probe jobs are not configured"),
        ("g2-standard-8", "Vertex AI probe jobs are not configured"),
    ],
)
def test_a_bad_or_unconfigured_machine_is_one_line_exit_2(
    on: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from advisor.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main([*PROBE, "--on", on])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and err.strip().count("\n") == 0


def test_probe_on_is_in_the_help() -> None:
    result = CliRunner().invoke(cli, ["probe", "--help"])
    assert result.exit_code == 0 and "--on MACHINE" in result.output
    assert "--emulate" not in result.output  # hidden: for tests


def test_the_cost_line_says_where_it_was_measured_and_what_it_cost() -> None:
    job = {"job_id": "advisor-probe-fcn-b32-1", "wall_s": 312.2, "billed_s": 187.0,
           "billed_source": "BillableTimeInSeconds", "cost_usd": 0.0731}  # fmt: skip
    line = cost_line({"machine": "sagemaker:ml.g5.xlarge", "source": "measured", "cached": False,
                      "job": job})  # fmt: skip
    assert line == (
        "measured on sagemaker:ml.g5.xlarge (job advisor-probe-fcn-b32-1): wall 312 s, "
        "billed 187 s (BillableTimeInSeconds), USD 0.07"
    )
    emulated = cost_line({"machine": "vertex:g2-standard-8", "source": "emulated",
                          "cached": True, "job": job})  # fmt: skip
    assert emulated.startswith("emulated on this machine as vertex:g2-standard-8")
    assert "(not spent)" in emulated and emulated.endswith("cached, no job started")


# -- cloud.yaml ------------------------------------------------------------------------------


def test_cloud_yaml_is_read_and_options_override_it(_advisor_home: Path) -> None:
    _advisor_home.mkdir(parents=True, exist_ok=True)
    (_advisor_home / "cloud.yaml").write_text(
        "image: reg/advisor:1\n"
        "sagemaker: {role: arn:aws:iam::1:role/R, region: us-east-1, output: s3://b/p}\n"
        "vertex: {project: p1, output: gs://b/p, image: us-docker.pkg.dev/p1/a/advisor:1}\n"
    )
    settings = CloudSettings.load()
    assert settings.provider("sagemaker")["role"] == "arn:aws:iam::1:role/R"
    assert settings.image_for("sagemaker") == "reg/advisor:1"
    assert settings.image_for("vertex") == "us-docker.pkg.dev/p1/a/advisor:1"
    over = settings.with_options("sagemaker", role="arn:aws:iam::2:role/S", project="ignored",
                                 image="reg/advisor:2", region=None)  # fmt: skip
    assert over.provider("sagemaker") == {"role": "arn:aws:iam::2:role/S", "region": "us-east-1",
                                          "output": "s3://b/p"}  # fmt: skip
    assert over.image_for("sagemaker") == "reg/advisor:2"
    assert "project" not in over.providers["sagemaker"]
    with pytest.raises(
        AdvisorError, match=r"Azure ML probe jobs are not configured \(no section.*--subscription"
    ):
        settings.provider("azureml")
    only = CloudSettings().with_options("azureml", compute="gpu-cluster")
    assert only.provider("azureml") == {"compute": "gpu-cluster"}
    with pytest.raises(AdvisorError, match=r"No container image.*--image"):
        only.image_for("azureml")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("sagemaker: {rol: x}\n", "unknown sagemaker key(s) rol"),
        ("aws: {role: x}\n", "unknown key(s) aws"),
        ("sagemaker: [1, 2]\n", "sagemaker must be a mapping"),
        ("sagemaker: {role: [x\n", "line 2: not valid YAML"),
        ("- 1\n", "expected a mapping"),
        ("a: &a [*a]\n", "cloud.yaml"),
    ],
)
def test_a_bad_cloud_yaml_is_one_line(_advisor_home: Path, text: str, says: str) -> None:
    _advisor_home.mkdir(parents=True, exist_ok=True)
    (_advisor_home / "cloud.yaml").write_text(text)
    with pytest.raises(AdvisorError) as exc:
        CloudSettings.load()
    assert says in str(exc.value) and "\n" not in str(exc.value)


# -- the ledger and emulated probes ------------------------------------------------------------


@pytest.mark.slow
def test_an_emulated_probe_is_kept_out_of_the_ledger_unless_a_test_opts_in(
    _advisor_home: Path,
) -> None:
    """Its times are this machine's: recording them as a g5's would poison the ledger. With
    ``record_emulated`` (this test only) the same path records it and corrects predictions."""
    from advisor.probes.result import ProbeRequest
    from advisor.probes.runner import run_probe
    from advisor.providers.catalog import load
    from advisor.providers.probe_jobs_local import LocalJobRunner

    from advisor.evaluation.workload import WorkloadInfo
    from advisor.prediction.timing.model import predict
    from advisor.remote.probe import remote_probe

    catalog = load()
    machine = catalog.get("vertex:g2-standard-8")
    storage = f"sqlite:///{_advisor_home / 'studies.db'}"
    fcn = WorkloadInfo(name="fcn", framework="torch", n_train=1)
    local = run_probe(ProbeRequest(workload="fcn", batch_size=16, iterations=4, threads=1,
                                   gradient_noise=False))  # fmt: skip
    kw = dict(storage=storage, settings=CloudSettings(), iterations=4, local_probe=local,
              catalog=catalog)  # fmt: skip
    first = remote_probe(fcn, machine, 16, runner=LocalJobRunner("vertex"), **kw)  # type: ignore[arg-type]
    assert first.emulated and first.result.ok and first.calibration is None
    assert predict(local, machine, catalog, 16, ledger_storage=storage).calibration_points == 0

    second = remote_probe(fcn, machine, 32, runner=LocalJobRunner("vertex"),
                          record_emulated=True, **kw)  # type: ignore[arg-type]  # fmt: skip
    assert second.emulated and second.calibration is not None
    after = predict(local, machine, catalog, 32, ledger_storage=storage)
    assert after.calibration_points == 1 and after.calibration == pytest.approx(second.calibration)
    assert "emulated" in " ".join(after.calibration_evidence.split())


def test_the_tuning_doc_cloud_yaml_example_loads(_advisor_home: Path) -> None:
    doc = (ROOT / "docs" / "tuning.md").read_text()
    block = doc.split("```yaml\nimage: ", 1)[1].split("```", 1)[0]
    _advisor_home.mkdir(parents=True, exist_ok=True)
    (_advisor_home / "cloud.yaml").write_text("image: " + block)
    settings = CloudSettings.load()
    for provider in ("sagemaker", "vertex", "azureml"):
        assert settings.provider(provider) and settings.image_for(provider)
    assert settings.provider("sagemaker")["output"].startswith("s3://")
