"""The container side of a remote probe (``advisor.probes.job_entry``), run for real in a
subprocess with each service's environment layout through the ``local`` back end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from advisor.probes.job_entry import EntryError, main, output_dir, resolve_device
from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.providers.catalog import load
from advisor.providers.probe_jobs import RESULT_FILE, ProbeJobSpec, job_command
from advisor.providers.probe_jobs_local import LocalJobRunner

ENTRY = ("python", "-m", "advisor.probes.job_entry")


def _request(**kw: object) -> ProbeRequest:
    base = dict(workload="fcn", batch_size=32, iterations=4, threads=1, device="auto",
                timeout_s=120.0, gradient_noise=False)  # fmt: skip
    base.update(kw)
    return ProbeRequest(**base)  # type: ignore[arg-type]


def _spec(
    request: ProbeRequest, machine: str = "sagemaker:ml.g5.xlarge", **kw: object
) -> ProbeJobSpec:
    command = (*ENTRY, "--request", request.to_json())
    base: dict[str, object] = dict(job_name="probe-fcn", machine=load().get(machine),
                                   image="advisor:test", command=command, max_runtime_s=300)  # fmt: skip
    base.update(kw)
    return ProbeJobSpec(**base)  # type: ignore[arg-type]


# Where each service keeps the folder it uploads, relative to the job's folder here.
WHERE = {
    "sagemaker": "opt_ml/model",
    "vertex": "gcs/my-bucket/{job}/model",  # gs://my-bucket/<job>/model through the FUSE mount
    "azure-ml": "outputs/result",
}


@pytest.mark.slow
@pytest.mark.parametrize("service", ["sagemaker", "vertex", "azure-ml"])
def test_the_job_command_runs_in_each_service_layout(service: str, tmp_path: Path) -> None:
    runner = LocalJobRunner(service, workdir=tmp_path)
    out = runner.run(_spec(_request(), output="gs://my-bucket/probes"))
    assert out.state == "completed" and out.ok, out.error
    # An emulation says so: this machine's timings, never the g5's.
    assert out.service == "local" and out.billed_source.startswith("emulated on this machine")
    assert out.price_per_hour == load().get("sagemaker:ml.g5.xlarge").on_demand_usd_per_h
    assert 0 < out.billed_s <= out.wall_s + 1e-6 and out.cost_usd > 0
    result = ProbeResult.from_dict(json.loads(out.result_text or ""))
    assert result.ok and result.workload == "fcn" and result.batch_size == 32
    assert result.device == "cpu"  # "auto" resolved in the job: no GPU visible here
    assert len(result.iteration_s) == 4 and all(t > 0 for t in result.iteration_s)
    assert result.fingerprint["remote_job"] == {"layout": service, "job": out.job_id}
    folder = runner.folder(out.job_id)
    assert (folder / WHERE[service].format(job=out.job_id) / RESULT_FILE).is_file()
    log = (folder / "job.log").read_text()
    assert log.splitlines()[0].startswith("advisor-probe-job: device=cpu (auto: no GPU visible")


@pytest.mark.slow
def test_a_failing_probe_comes_back_as_a_failed_result_with_exit_0(tmp_path: Path) -> None:
    runner = LocalJobRunner("sagemaker", workdir=tmp_path)
    out = runner.run(_spec(_request(workload="no-such-workload")))
    assert out.state == "completed", out.error  # the job itself succeeded: it wrote the file
    result = ProbeResult.from_json(out.result_text or "")
    assert not result.ok and result.status == "error"
    assert "no-such-workload" in result.reason


def test_the_time_limit_stops_the_job(tmp_path: Path) -> None:
    runner = LocalJobRunner("sagemaker", workdir=tmp_path, poll_s=0.05)
    spec = _spec(_request(), command=("python", "-c", "import time; time.sleep(60)"),
                 max_runtime_s=1)  # fmt: skip
    out = runner.run(spec)
    assert out.state == "stopped" and not out.ok
    assert "MaxRuntimeInSeconds (1 s)" in (out.error or "")
    assert 1.0 <= out.wall_s < 10.0
    assert out.result_text is None


def test_a_job_that_exits_non_zero_is_failed_with_its_last_log_line(tmp_path: Path) -> None:
    runner = LocalJobRunner("vertex", workdir=tmp_path)
    out = runner.run(_spec(_request(), command=(*ENTRY, "--request", "{not json")))
    assert out.state == "failed"
    assert "exit code 2" in (out.error or "") and "bad --request" in (out.error or "")


def test_output_folder_resolution(tmp_path: Path) -> None:
    assert output_dir("/x/out", {"SM_MODEL_DIR": "/opt/ml/model"}) == (Path("/x/out"), "--out")
    assert output_dir(None, {"SM_MODEL_DIR": "/opt/ml/model"}) == (
        Path("/opt/ml/model"), "$SM_MODEL_DIR")  # fmt: skip
    assert output_dir(None, {"AIP_MODEL_DIR": "gs://b/p/model"})[0] == Path("/gcs/b/p/model")
    env = {"AIP_MODEL_DIR": "gs://b/p", "ADVISOR_GCS_MOUNT": str(tmp_path)}
    assert output_dir(None, env)[0] == tmp_path / "b" / "p"
    with pytest.raises(EntryError, match="no output folder: pass --out DIR"):
        output_dir(None, {})


def test_no_output_folder_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in ("SM_MODEL_DIR", "AIP_MODEL_DIR"):
        monkeypatch.delenv(var, raising=False)
    assert main(["--request", _request().to_json()]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no output folder" in err and "Traceback" not in err
    assert main(["--request", '{"workload": "fcn"}', "--out", "x"]) == 2  # no batch size
    assert "bad --request" in capsys.readouterr().err


def test_device_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import advisor.probes.job_entry as entry

    assert resolve_device("cpu", "torch") == ("cpu", "asked for")
    assert resolve_device("cuda", "torch")[0] == "cuda"  # asked for: the probe reports if absent
    device, why = resolve_device("auto", "torch")
    assert (device, why.startswith("auto:")) in (("cpu", True), ("cuda", True))
    asked: list[str] = []

    def visible(framework: str) -> int:  # what the framework would say, asked only with a driver
        asked.append(framework)
        return 2

    monkeypatch.setattr(entry, "_visible_gpus", visible)
    no_driver = (str(tmp_path / "nvidiactl"),)
    device, why = resolve_device("auto", "keras", no_driver)
    assert device == "cpu" and "no GPU driver here" in why and asked == []
    driver = tmp_path / "nvidiactl"
    driver.touch()
    assert resolve_device("auto", "keras", (str(driver),)) == ("cuda", "auto: 2 GPU(s) visible")
    assert asked == ["keras"]


def test_azure_command_gets_the_output_placeholder_once() -> None:
    once = job_command(ENTRY, "azure-ml")
    assert once[-2:] == ("--out", "${{outputs.result}}")
    assert job_command(once, "azure-ml") == once
    assert job_command(ENTRY, "sagemaker") == ENTRY


def test_the_image_installs_the_entry_and_runs_the_command_it_is_given() -> None:
    """The Docker image installs the package from ``probes/`` (where the entry lives) and its
    entry point runs a command it is given as is (Vertex AI, Azure ML; SageMaker's
    ``ContainerEntrypoint`` replaces the entry point altogether)."""
    root = Path(__file__).resolve().parents[2]
    dockerfile = (root / "docker" / "Dockerfile").read_text()
    assert "COPY probes ./probes" in dockerfile and 'pip install ".[torch]"' in dockerfile
    assert (root / "probes" / "job_entry.py").is_file()
    entry = (root / "docker" / "entrypoint.sh").read_text()
    assert '*)\n        exec "$@"' in entry
