"""Vertex AI probe jobs: the real ``JobServiceClient`` (REST) and ``google-cloud-storage``
client against one local server that records what they send and plays Vertex AI (the
CustomJob resource) and Cloud Storage (the job's output folder)."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from advisor.providers import catalog
from advisor.providers.probe_jobs import RESULT_FILE, ProbeJobSpec
from advisor.providers.vertex_probe import VertexProbeJobRunner

from advisor.errors import AdvisorError

pytest.importorskip("google.cloud.aiplatform_v1")
pytest.importorskip("google.cloud.storage")


from fake_servers import recording_server, route  # tests/helpers, on pytest's pythonpath

NOW = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.timezone.utc)
PARENT = "projects/p1/locations/us-central1"
IMAGE = "us-docker.pkg.dev/p1/advisor/advisor:1"
ENTRY = ("python", "-m", "advisor.probes.job_entry")


def _stamp(seconds: float) -> str:
    return (NOW + dt.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


@dataclass
class FakeVertex:
    """Vertex AI custom jobs and the Cloud Storage objects under ``mount`` (the folder that
    stands for the ``/gcs/`` FUSE mount: ``mount/<bucket>/<object>``). Each GET of a job
    answers the next of ``states`` (the last one repeats), with Vertex's times."""

    mount: Path
    states: list[str] = field(default_factory=lambda: ["JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"])
    start_s: float = 95.0  # created -> first RUNNING (provisioning, image pull)
    run_s: float = 47.0  # RUNNING -> end
    error: str | None = None
    on_submit: Callable[[dict[str, Any]], None] | None = None  # the container, run at creation
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    gets: int = 0

    def respond(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        route = path.split("?")[0]
        if route.startswith("/download/storage/v1/b/"):
            bucket, _, obj = route.removeprefix("/download/storage/v1/b/").partition("/o/")
            file = self.mount / bucket / urllib.parse.unquote(obj)
            if file.is_file():
                return 200, file.read_bytes()
            return 404, {"error": {"code": 404, "message": f"No such object: {bucket}/{obj}"}}
        if method == "POST" and route == f"/v1/{PARENT}/customJobs":
            name = f"{PARENT}/customJobs/{len(self.jobs) + 1}"
            self.jobs[name] = {**body, "name": name, "state": "JOB_STATE_PENDING",
                               "createTime": _stamp(0)}  # fmt: skip
            if self.on_submit is not None:
                self.on_submit(self.jobs[name])
            return 200, self.jobs[name]
        if method == "POST" and route.endswith(":cancel"):
            self.jobs[route.removeprefix("/v1/").removesuffix(":cancel")]["cancelled"] = True
            return 200, {}
        name = route.removeprefix("/v1/")
        if method == "GET" and name in self.jobs:
            state = self.states[min(self.gets, len(self.states) - 1)]
            self.gets += 1
            job = {**self.jobs[name], "state": state}
            if state != "JOB_STATE_PENDING":
                job["startTime"] = _stamp(self.start_s)
            if state in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"):
                job["endTime"] = _stamp(self.start_s + self.run_s)
            if self.error and state == "JOB_STATE_FAILED":
                job["error"] = {"code": 3, "message": self.error}
            return 200, job
        return 404, {"error": {"code": 404, "message": f"{name} not found", "status": "NOT_FOUND"}}

    def run_container(self, job: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        """Run the job's container command here as Vertex runs it: AIP_MODEL_DIR is
        ``<base_output_directory>/model/`` and gs:// paths are files under the mount."""
        container = job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
        base = job["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"]
        env = {**os.environ, **{e["name"]: e["value"] for e in container.get("env", [])}}
        env.update(AIP_MODEL_DIR=f"{base}/model/", ADVISOR_GCS_MOUNT=str(self.mount),
                   CLOUD_ML_JOB_ID=job["name"].rsplit("/", 1)[-1])  # fmt: skip
        argv = [sys.executable if a == "python" else a for a in container["command"]]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def machine() -> catalog.InstanceType:
    return catalog.load().get("vertex:a2-highgpu-1g")


def _spec(machine: catalog.InstanceType, **overrides: Any) -> ProbeJobSpec:
    request = {"workload": "fcn", "batch_size": 32, "iterations": 3, "device": "auto"}
    fields: dict[str, Any] = {
        "job_name": "advisor-probe-fcn-32-ab12",
        "machine": machine,
        "image": IMAGE,
        "command": (*ENTRY, "--request", json.dumps(request)),
        "max_runtime_s": 600,
        "output": "gs://probe-bucket/advisor/probes",
        "env": {"ADVISOR_PROBE_THREADS": "4"},
    }
    fields.update(overrides)
    return ProbeJobSpec(**fields)


@contextmanager
def connected(
    fake: FakeVertex, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> Iterator[tuple[VertexProbeJobRunner, list[dict[str, Any]]]]:
    """A runner whose real SDK clients talk to ``fake``: the JobServiceClient through its
    endpoint option, the storage client through STORAGE_EMULATOR_HOST (as built by the
    runner itself)."""
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    with recording_server(fake.respond) as (url, seen):
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
        client = aiplatform_v1.JobServiceClient(
            transport="rest",
            credentials=AnonymousCredentials(),
            client_options=ClientOptions(api_endpoint=url),
        )
        settings: dict[str, Any] = {"project": "p1", "output": "gs://probe-bucket/advisor/probes",
                                    "client": client, "credentials": AnonymousCredentials(),
                                    "poll_s": 0.0}  # fmt: skip
        settings.update(options)
        yield VertexProbeJobRunner(**settings), seen


def _sent_job(seen: list[dict[str, Any]]) -> dict[str, Any]:
    posts = [r for r in seen if r["method"] == "POST" and route(r).endswith("/customJobs")]
    assert len(posts) == 1
    body: dict[str, Any] = posts[0]["body"]
    return body


def _write_result(fake: FakeVertex, job: dict[str, Any], text: str) -> None:
    """What the container leaves in AIP_MODEL_DIR, for the tests that do not run it."""
    base = job["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"].removeprefix("gs://")
    folder = fake.mount / base / "model"
    folder.mkdir(parents=True)
    (folder / RESULT_FILE).write_text(text, encoding="utf-8")


TEXT = '{"status": "ok", "written_by": "the container"}\n'


def test_a_probe_job_is_a_custom_job_on_the_machine_and_its_result_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: catalog.InstanceType
) -> None:
    from google.cloud import aiplatform_v1

    fake = FakeVertex(tmp_path / "gcs")
    fake.on_submit = lambda job: _write_result(fake, job, TEXT)
    spec = _spec(machine)
    polls: list[str] = []
    with connected(fake, monkeypatch) as (runner, seen):
        outcome = runner.run(spec, on_status=lambda job_id, poll: polls.append(poll.state))

    body = _sent_job(seen)
    assert route(seen[0]) == f"/v1/{PARENT}/customJobs"
    job = aiplatform_v1.CustomJob.from_json(json.dumps(body))  # strict: what Vertex parses
    assert job.display_name == spec.job_name
    (pool,) = job.job_spec.worker_pool_specs
    assert pool.replica_count == 1
    assert pool.machine_spec.machine_type == "a2-highgpu-1g"
    assert pool.machine_spec.accelerator_type.name == "NVIDIA_TESLA_A100"  # catalog: A100-40GB
    assert pool.machine_spec.accelerator_count == 1
    assert pool.container_spec.image_uri == IMAGE
    assert list(pool.container_spec.command) == list(spec.command)
    assert {e.name: e.value for e in pool.container_spec.env} == {"ADVISOR_PROBE_THREADS": "4"}
    assert body["jobSpec"]["scheduling"] == {"timeout": "600s"}  # on demand: no strategy
    assert job.job_spec.base_output_directory.output_uri_prefix == (
        "gs://probe-bucket/advisor/probes/advisor-probe-fcn-32-ab12"
    )

    # RUNNING, then SUCCEEDED: created at 0, running from 95 s, ended at 142 s.
    assert polls == ["running", "completed"]
    assert outcome.job_id == f"{PARENT}/customJobs/1"
    assert outcome.service == "vertex"
    assert outcome.state == "completed" and outcome.ok and outcome.error is None
    assert outcome.result_text == TEXT
    assert outcome.wall_s == pytest.approx(142.0)
    assert outcome.billed_s == pytest.approx(60.0)  # 47 s on the machine, in 30 s increments
    assert "30 s increments" in outcome.billed_source
    assert outcome.price_per_hour == machine.on_demand_usd_per_h
    assert outcome.cost_usd == pytest.approx(60.0 * machine.on_demand_usd_per_h / 3600)
    # The result was read from AIP_MODEL_DIR = <base_output_directory>/model/.
    downloads = [r["path"] for r in seen if r["path"].startswith("/download/")]
    assert downloads == [
        "/download/storage/v1/b/probe-bucket/o/"
        "advisor%2Fprobes%2Fadvisor-probe-fcn-32-ab12%2Fmodel%2Fprobe-result.json?alt=media"
    ]


def test_a_spot_probe_asks_for_spot_vms_and_is_priced_at_the_spot_price(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: catalog.InstanceType
) -> None:
    from google.cloud import aiplatform_v1

    fake = FakeVertex(tmp_path / "gcs")
    fake.on_submit = lambda job: _write_result(fake, job, TEXT)
    with connected(fake, monkeypatch) as (runner, seen):
        outcome = runner.run(_spec(machine, spot=True, max_runtime_s=300))
    job = aiplatform_v1.CustomJob.from_json(json.dumps(_sent_job(seen)))
    assert job.job_spec.scheduling.strategy == aiplatform_v1.Scheduling.Strategy.SPOT
    assert job.job_spec.scheduling.timeout.total_seconds() == 300
    assert machine.spot_usd_per_h is not None
    assert outcome.price_per_hour == machine.spot_usd_per_h
    assert outcome.cost_usd == pytest.approx(60.0 * machine.spot_usd_per_h / 3600)


def test_a_failed_job_ends_failed_with_vertex_s_message_and_nothing_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: catalog.InstanceType
) -> None:
    message = "The replica workerpool0-0 exited with a non-zero status of 2."
    fake = FakeVertex(tmp_path / "gcs", states=["JOB_STATE_RUNNING", "JOB_STATE_FAILED"],
                      run_s=12.0, error=message)  # fmt: skip
    with connected(fake, monkeypatch) as (runner, seen):
        outcome = runner.run(_spec(machine))
    assert outcome.state == "failed" and not outcome.ok
    assert outcome.error == message
    assert outcome.result_text is None
    assert outcome.billed_s == pytest.approx(30.0)  # 12 s: the 30 s minimum increment
    assert not [r for r in seen if r["path"].startswith("/download/")]


def test_a_completed_job_without_a_result_file_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: catalog.InstanceType
) -> None:
    with connected(FakeVertex(tmp_path / "gcs"), monkeypatch) as (runner, seen):
        outcome = runner.run(_spec(machine))
    assert outcome.state == "completed" and not outcome.ok
    assert outcome.error == "the job completed but wrote no result file"
    assert [r for r in seen if r["path"].startswith("/download/")]  # it did look (a 404)


def test_a_job_past_its_time_limit_is_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: catalog.InstanceType
) -> None:
    ticks = iter([0.0, 10.0, 5000.0, 5000.0])  # submitted, first poll, past the limit, end
    fake = FakeVertex(tmp_path / "gcs", states=["JOB_STATE_PENDING"])
    with connected(fake, monkeypatch, clock=lambda: next(ticks)) as (runner, seen):
        outcome = runner.run(_spec(machine, max_runtime_s=600))
    cancels = [r for r in seen if r["method"] == "POST" and route(r).endswith(":cancel")]
    assert [route(r) for r in cancels] == [f"/v1/{PARENT}/customJobs/1:cancel"]
    assert fake.jobs[f"{PARENT}/customJobs/1"]["cancelled"] is True
    assert outcome.state == "timeout" and outcome.result_text is None
    assert outcome.billed_s == 0.0  # never started on a machine
    assert outcome.error is not None and "stopped" in outcome.error


def test_vertex_refusals_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: catalog.InstanceType
) -> None:
    def refuse(method: str, path: str, body: Any) -> tuple[int, Any]:
        return 403, {"error": {"code": 403, "status": "PERMISSION_DENIED",
                               "message": "Permission 'aiplatform.customJobs.create' denied"}}  # fmt: skip

    fake = FakeVertex(tmp_path / "gcs")
    fake.respond = refuse  # type: ignore[method-assign]
    with connected(fake, monkeypatch) as (runner, _), pytest.raises(AdvisorError) as err:
        runner.run(_spec(machine))
    assert "aiplatform.customJobs.create' denied" in str(err.value)
    assert "Vertex AI User role" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"output": None}, "write their result to Cloud Storage"),
        ({"output": "s3://bucket/probes"}, "not 's3://bucket/probes'"),
        ({"project": None}, "No Google Cloud project"),
    ],
)
def test_missing_settings_are_one_line_errors(
    settings: dict[str, Any], words: str, machine: catalog.InstanceType
) -> None:
    from google.auth.credentials import AnonymousCredentials

    options: dict[str, Any] = {"project": "p1", "output": "gs://b/p",
                               "credentials": AnonymousCredentials(), **settings}  # fmt: skip
    runner = VertexProbeJobRunner(**options)
    with pytest.raises(AdvisorError) as err:
        runner.check()
    assert words in str(err.value) and "To fix:" in str(err.value)
    assert "\n" not in str(err.value)


def test_no_credentials_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-key.json"))
    runner = VertexProbeJobRunner(project="p1", output="gs://b/p")
    with pytest.raises(AdvisorError, match="No Google Cloud credentials found"):
        runner.check()


def test_other_clouds_and_tpus_are_refused(machine: catalog.InstanceType) -> None:
    from google.auth.credentials import AnonymousCredentials

    runner = VertexProbeJobRunner(project="p1", output="gs://b/p",
                                  credentials=AnonymousCredentials())  # fmt: skip
    rows = catalog.load()
    with pytest.raises(AdvisorError, match=r"cannot run on sagemaker:ml\.g5\.2xlarge"):
        runner.run(_spec(rows.get("sagemaker:ml.g5.2xlarge")))
    tpu = next(
        r for r in rows.instances if r.provider == "gcp" and (r.accelerator or "").startswith("TPU")
    )
    with pytest.raises(AdvisorError, match="is a TPU machine"):
        runner.job(_spec(tpu))


@pytest.mark.slow
def test_the_container_command_really_writes_the_result_that_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: catalog.InstanceType
) -> None:
    """The command the request carries, run here by ``advisor.probes.job_entry`` with the
    variables Vertex sets: the probe's result file is written through the (emulated) FUSE
    mount at AIP_MODEL_DIR and read back through the storage API."""
    from advisor.probes.result import ProbeResult

    fake = FakeVertex(tmp_path / "gcs")
    ran: list[subprocess.CompletedProcess[str]] = []
    fake.on_submit = lambda job: ran.append(fake.run_container(job))
    request = {"workload": "fcn", "batch_size": 32, "iterations": 3, "threads": 1,
               "validation_batches": 1, "gradient_noise": False, "device": "auto"}  # fmt: skip
    spec = _spec(machine, command=(*ENTRY, "--request", json.dumps(request)))
    with connected(fake, monkeypatch) as (runner, _):
        outcome = runner.run(spec)
    (proc,) = ran
    assert proc.returncode == 0, proc.stderr
    assert "from $AIP_MODEL_DIR" in proc.stdout
    assert outcome.ok and outcome.result_text is not None
    result = ProbeResult.from_json(outcome.result_text)
    assert result.ok and result.batch_size == 32 and result.device == "cpu"  # no GPU here
    assert result.fingerprint["remote_job"] == {"layout": "vertex", "job": "1"}
