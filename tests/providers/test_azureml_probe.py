"""Azure ML probe jobs: the real ``MLClient`` against a local server that records what it
sends and plays the workspace (jobs, environments, compute), with the jobs' runs in a real
MLflow store (what the workspace's MLflow tracking serves: run times and artifacts)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import shlex
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from advisor.providers import catalog
from advisor.providers.azureml_probe import RESULT_DIR, AzureMLProbeJobRunner
from advisor.providers.probe_jobs import RESULT_FILE, ProbeJobSpec

from advisor.errors import AdvisorError

pytest.importorskip("azure.ai.ml")
pytest.importorskip("mlflow")


from fake_servers import recording_server, route  # tests/helpers, on pytest's pythonpath

NOW = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.timezone.utc)
SUB = "00000000-0000-0000-0000-000000000001"
WS = f"/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.MachineLearningServices/workspaces/ws"
IMAGE = "advisoracr.azurecr.io/advisor:1"
ENTRY = ("python", "-m", "advisor.probes.job_entry")
TEXT = '{"status": "ok", "written_by": "the container"}\n'


class FakeToken:
    """A TokenCredential that hands out a dummy bearer token."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken("dummy-token", 4102444800)


def _ms(seconds: float) -> int:
    return int((NOW + dt.timedelta(seconds=seconds)).timestamp() * 1000)


@dataclass
class FakeWorkspace:
    """An Azure ML workspace: jobs answer the next of ``statuses`` on each GET (the last
    repeats); each job's run lives in the MLflow store at ``tracking_uri`` (Azure names a
    job's MLflow run after the job), started ``start_s`` after creation and ended
    ``run_s`` later when the job ends. ``container`` plays the job's container: it returns
    the job's working directory, whose ``outputs`` folder is uploaded as the run's artifacts."""

    tracking_uri: str
    statuses: list[str] = field(default_factory=lambda: ["Running", "Completed"])
    start_s: float = 95.0
    run_s: float = 75.0
    computes: dict[str, dict[str, Any]] = field(default_factory=dict)
    container: Callable[[dict[str, Any]], Path | None] | None = None
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    cancelled: list[str] = field(default_factory=list)
    gets: int = 0

    def new_run(self) -> str:
        """A run for the next job (the local store picks run ids: the job is named after it)."""
        from mlflow.tracking import MlflowClient

        client = MlflowClient(self.tracking_uri)
        exp = client.get_experiment_by_name("advisor-probes")
        artifacts = Path(self.tracking_uri.removeprefix("sqlite:///")).with_name("artifacts")
        exp_id = (
            exp.experiment_id
            if exp
            else client.create_experiment("advisor-probes", artifacts.as_uri())
        )
        run_id: str = client.create_run(exp_id, start_time=_ms(self.start_s)).info.run_id
        return run_id

    def _end_run(self, name: str, status: str) -> None:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(self.tracking_uri)
        folder = self.container(self.jobs[name]) if self.container else None
        if folder is not None and (folder / "outputs").is_dir():
            client.log_artifacts(name, str(folder / "outputs"), "outputs")
        mlflow_status = {"Completed": "FINISHED", "Failed": "FAILED"}.get(status, "KILLED")
        client.set_terminated(name, mlflow_status, end_time=_ms(self.start_s + self.run_s))

    def respond(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        route = path.split("?")[0]
        name = route.rstrip("/").split("/")[-1]
        if method == "PUT" and "/environments/" in route:
            return 200, {**body, "id": route, "name": name}
        if method == "PUT" and route == f"{WS}/jobs/{name}":
            self.jobs[name] = {**body, "id": route, "name": name,
                               "systemData": {"createdAt": NOW.isoformat()}}  # fmt: skip
            self.jobs[name]["properties"]["status"] = "Queued"
            return 201, self.jobs[name]
        if method == "POST" and route.endswith("/cancel"):
            self.cancelled.append(route.split("/")[-2])
            return 200, {}
        if method == "GET" and route == f"{WS}/jobs/{name}" and name in self.jobs:
            status = self.statuses[min(self.gets, len(self.statuses) - 1)]
            self.gets += 1
            job = self.jobs[name]
            if (
                status in ("Completed", "Failed", "Canceled")
                and job["properties"]["status"] != status
            ):
                self._end_run(name, status)
            job["properties"]["status"] = status
            return 200, job
        if method == "GET" and route == f"{WS}/computes/{name}" and name in self.computes:
            return 200, {"id": route, "name": name, "properties": self.computes[name]}
        return 404, {"error": {"code": "NotFound", "message": f"{route} not found"}}


def amlcompute(vm_size: str, priority: str = "Dedicated") -> dict[str, Any]:
    return {"computeType": "AmlCompute",
            "properties": {"vmSize": vm_size, "vmPriority": priority,
                           "scaleSettings": {"maxNodeCount": 1, "minNodeCount": 0}}}  # fmt: skip


@pytest.fixture
def machine() -> catalog.InstanceType:
    return catalog.load().get("azure-ml:NV36ads_A10_v5")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One MLflow store for the module (creating its tables takes seconds)."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def fake(store: str) -> FakeWorkspace:
    return FakeWorkspace(tracking_uri=store)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, Path]:
    """A server context with a self-signed certificate for 127.0.0.1, and the certificate
    (the SDK sends bearer tokens only over https, and checks the server's certificate)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1))
        .not_valid_after(dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    return context, folder / "cert.pem"


def _spec(machine: catalog.InstanceType, job_name: str, **overrides: Any) -> ProbeJobSpec:
    request = {"workload": "fcn", "batch_size": 32, "iterations": 3, "device": "auto"}
    fields: dict[str, Any] = {
        "job_name": job_name,
        "machine": machine,
        "image": IMAGE,
        "command": (*ENTRY, "--request", json.dumps(request)),
        "max_runtime_s": 600,
        "env": {"ADVISOR_PROBE_THREADS": "4"},
    }
    fields.update(overrides)
    return ProbeJobSpec(**fields)


@contextmanager
def connected(
    fake: FakeWorkspace,
    monkeypatch: pytest.MonkeyPatch,
    tls: tuple[ssl.SSLContext, Path],
    **options: Any,
) -> Iterator[tuple[AzureMLProbeJobRunner, list[dict[str, Any]]]]:
    """A runner whose MLClient (built by the runner from the credential) talks to ``fake``
    over https (the certificate trusted through REQUESTS_CA_BUNDLE)."""
    context, cert = tls
    with recording_server(fake.respond, tls=context) as (url, seen):
        monkeypatch.setenv("AZUREML_DEV_URL_MFE", url)
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
        settings: dict[str, Any] = {"subscription": SUB, "resource_group": "rg", "workspace": "ws",
                                    "credential": FakeToken(), "tracking_uri": fake.tracking_uri,
                                    "poll_s": 0.0}  # fmt: skip
        settings.update(options)
        yield AzureMLProbeJobRunner(**settings), seen


def _sent_job(seen: list[dict[str, Any]]) -> dict[str, Any]:
    puts = [r for r in seen if r["method"] == "PUT" and "/jobs/" in route(r)]
    assert len(puts) == 1
    body: dict[str, Any] = puts[0]["body"]
    return body


def writes(text: str, root: Path) -> Callable[[dict[str, Any]], Path]:
    """A container that leaves ``text`` as the result file in its working directory."""

    def run(job: dict[str, Any]) -> Path:
        folder = root / job["name"] / RESULT_DIR
        folder.mkdir(parents=True)
        (folder / RESULT_FILE).write_text(text, encoding="utf-8")
        return root / job["name"]

    return run


def test_a_probe_job_is_a_serverless_command_job_on_the_vm_size_and_its_result_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: catalog.InstanceType,
    fake: FakeWorkspace, tls: tuple[ssl.SSLContext, Path],
) -> None:  # fmt: skip
    fake.container = writes(TEXT, tmp_path / "wd")
    spec = _spec(machine, fake.new_run())
    polls: list[str] = []
    with connected(fake, monkeypatch, tls) as (runner, seen):
        outcome = runner.run(spec, on_status=lambda job_id, poll: polls.append(poll.state))

    body = _sent_job(seen)
    env_puts = [r for r in seen if r["method"] == "PUT" and "/environments/" in route(r)]
    assert [r["body"]["properties"]["image"] for r in env_puts] == [IMAGE]  # inline image
    props = body["properties"]
    assert props["jobType"] == "Command"
    assert props["resources"]["instanceType"] == "Standard_NV36ads_A10_v5"
    assert props["queueSettings"] == {"jobTier": "Standard"}
    assert "computeId" not in props  # serverless
    assert props["limits"] == {"jobLimitsType": "Command", "timeout": "PT10M"}
    assert props["environmentVariables"] == {"ADVISOR_PROBE_THREADS": "4"}
    assert props["experimentName"] == "advisor-probes"
    assert props["environmentId"].endswith(env_puts[0]["path"].split("?")[0].split("/ws/")[1])
    assert shlex.split(props["command"]) == [*spec.command, "--out", RESULT_DIR]
    # The SDK loads what it sent back as a command job (the service echoes it).
    with connected(fake, monkeypatch, tls) as (runner, _):
        loaded = runner.client.jobs.get(spec.job_name)
    assert loaded.type == "command" and loaded.name == spec.job_name
    assert loaded.resources.instance_type == "Standard_NV36ads_A10_v5"
    assert loaded.limits.timeout == 600

    assert polls == ["running", "completed"]
    assert outcome.job_id == spec.job_name and outcome.service == "azure-ml"
    assert outcome.state == "completed" and outcome.ok and outcome.error is None
    assert outcome.result_text == TEXT
    assert outcome.wall_s == pytest.approx(170.0)  # created 0, run 95 s .. 170 s
    assert outcome.billed_s == pytest.approx(120.0)  # 75 s on the machine, per minute
    assert "per minute" in outcome.billed_source
    assert outcome.cost_usd == pytest.approx(120.0 * machine.on_demand_usd_per_h / 3600)


def test_a_spot_probe_runs_on_the_spot_tier_at_the_spot_price(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: catalog.InstanceType,
    fake: FakeWorkspace, tls: tuple[ssl.SSLContext, Path],
) -> None:  # fmt: skip
    fake.container = writes(TEXT, tmp_path / "wd")
    with connected(fake, monkeypatch, tls) as (runner, seen):
        outcome = runner.run(_spec(machine, fake.new_run(), spot=True, max_runtime_s=300))
    props = _sent_job(seen)["properties"]
    assert props["queueSettings"] == {"jobTier": "Spot"}
    assert props["limits"]["timeout"] == "PT5M"
    assert machine.spot_usd_per_h is not None
    assert outcome.ok and outcome.price_per_hour == machine.spot_usd_per_h


def test_a_named_cluster_of_the_vm_size_runs_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: catalog.InstanceType,
    fake: FakeWorkspace, tls: tuple[ssl.SSLContext, Path],
) -> None:  # fmt: skip
    fake.container = writes(TEXT, tmp_path / "wd")
    fake.computes["gpu-a10"] = amlcompute("STANDARD_NV36ADS_A10_V5")  # Azure's own casing
    with connected(fake, monkeypatch, tls, compute="gpu-a10") as (runner, seen):
        outcome = runner.run(_spec(machine, fake.new_run()))
    props = _sent_job(seen)["properties"]
    assert props["computeId"].endswith("/workspaces/ws/computes/gpu-a10")
    assert "instanceType" not in (props.get("resources") or {})
    assert "queueSettings" not in props  # the cluster's tier decides
    assert outcome.ok and outcome.result_text == TEXT


@pytest.mark.parametrize(
    ("cluster", "spot", "words"),
    [
        (
            amlcompute("Standard_NC6s_v3"),
            False,
            "runs Standard_NC6s_v3, not Standard_NV36ads_A10_v5",
        ),
        (amlcompute("Standard_NV36ads_A10_v5"), True, "spot probe asked for, but cluster"),
        (amlcompute("Standard_NV36ads_A10_v5", "LowPriority"), False, "is low-priority"),
    ],
)
def test_a_cluster_of_other_hardware_or_tier_is_refused_before_any_job(
    monkeypatch: pytest.MonkeyPatch, machine: catalog.InstanceType, fake: FakeWorkspace,
    cluster: dict[str, Any], spot: bool, words: str, tls: tuple[ssl.SSLContext, Path],
) -> None:  # fmt: skip
    fake.computes["c1"] = cluster
    with (
        connected(fake, monkeypatch, tls, compute="c1") as (runner, seen),
        pytest.raises(AdvisorError) as err,
    ):
        runner.run(_spec(machine, "advisor-probe-1", spot=spot))
    assert words in str(err.value) and "\n" not in str(err.value)
    assert not [r for r in seen if "/jobs/" in route(r)]


def test_a_failed_job_ends_failed_and_nothing_is_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: catalog.InstanceType,
    fake: FakeWorkspace, tls: tuple[ssl.SSLContext, Path],
) -> None:  # fmt: skip
    fake.statuses = ["Running", "Failed"]
    fake.run_s = 130.0
    fake.container = writes(TEXT, tmp_path / "wd")  # a file left behind is not a result
    name = fake.new_run()
    with connected(fake, monkeypatch, tls) as (runner, _):
        outcome = runner.run(_spec(machine, name))
    assert outcome.state == "failed" and not outcome.ok and outcome.result_text is None
    assert outcome.error is not None and outcome.error.startswith(f"Azure ML job {name} Failed")
    assert outcome.billed_s == pytest.approx(180.0)  # 130 s, per minute


def test_a_job_past_its_time_limit_is_cancelled(
    monkeypatch: pytest.MonkeyPatch,
    machine: catalog.InstanceType,
    fake: FakeWorkspace,
    tls: tuple[ssl.SSLContext, Path],
) -> None:
    fake.statuses = ["Queued"]
    ticks = iter([0.0, 10.0, 5000.0, 5000.0])  # submitted, first poll, past the limit, end
    job_name = fake.new_run()
    with connected(fake, monkeypatch, tls, clock=lambda: next(ticks)) as (runner, _):
        outcome = runner.run(_spec(machine, job_name))
    assert fake.cancelled == [job_name]
    assert outcome.state == "timeout" and outcome.result_text is None
    assert outcome.billed_s == 0.0  # never started on a machine


def test_azure_refusals_are_one_line_errors(
    monkeypatch: pytest.MonkeyPatch,
    machine: catalog.InstanceType,
    fake: FakeWorkspace,
    tls: tuple[ssl.SSLContext, Path],
) -> None:
    answer = fake.respond

    def refuse(method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "PUT" and "/jobs/" in path:
            return 400, {"error": {"code": "UserError", "message":
                                   "Instance type Standard_NV36ads_A10_v5 is not\nsupported"}}  # fmt: skip
        return answer(method, path, body)

    fake.respond = refuse  # type: ignore[method-assign]
    with connected(fake, monkeypatch, tls) as (runner, _), pytest.raises(AdvisorError) as err:
        runner.run(_spec(machine, "advisor-probe-2"))
    assert str(err.value).startswith("Azure ML: ")
    assert "is not supported" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"subscription": None}, "subscription (AZURE_SUBSCRIPTION_ID)"),
        (
            {"resource_group": None, "workspace": None},
            "resource group (AZURE_RESOURCE_GROUP), workspace",
        ),
        ({"tracking_uri": None}, "needs the 'azureml-mlflow' package"),
    ],
)
def test_missing_settings_are_one_line_errors(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, Any], words: str
) -> None:
    for var in ("AZURE_SUBSCRIPTION_ID", "AZURE_RESOURCE_GROUP", "AZUREML_WORKSPACE_NAME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setitem(sys.modules, "azureml.mlflow", None)  # not installed: import fails
    options: dict[str, Any] = {"subscription": SUB, "resource_group": "rg", "workspace": "ws",
                               "tracking_uri": "sqlite:///x.db", **settings}  # fmt: skip
    with pytest.raises(AdvisorError) as err:
        AzureMLProbeJobRunner(**options).check()
    assert words in str(err.value) and "To fix:" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_the_container_command_really_writes_the_result_that_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: catalog.InstanceType,
    fake: FakeWorkspace, tls: tuple[ssl.SSLContext, Path],
) -> None:  # fmt: skip
    """The job's command line, run here by a shell in a working directory as Azure ML runs it
    (its variables, AZUREML_RUN_ID): ``advisor.probes.job_entry`` writes the result under
    ``outputs/``, which the service uploads as the run's artifacts; it comes back from there."""
    from advisor.probes.result import ProbeResult

    ran: list[subprocess.CompletedProcess[str]] = []

    def container(job: dict[str, Any]) -> Path:
        props = job["properties"]
        folder = tmp_path / "wd" / job["name"]
        folder.mkdir(parents=True)
        env = {**os.environ, **props["environmentVariables"], "AZUREML_RUN_ID": job["name"]}
        line = props["command"].replace("python ", f"{shlex.quote(sys.executable)} ", 1)
        ran.append(subprocess.run(["bash", "-c", line], cwd=folder, env=env,
                                  capture_output=True, text=True, timeout=300))  # fmt: skip
        return folder

    fake.container = container
    request = {"workload": "fcn", "batch_size": 32, "iterations": 3, "threads": 1,
               "validation_batches": 1, "gradient_noise": False, "device": "auto"}  # fmt: skip
    name = fake.new_run()
    spec = _spec(machine, name, command=(*ENTRY, "--request", json.dumps(request)))
    with connected(fake, monkeypatch, tls) as (runner, _):
        outcome = runner.run(spec)
    (proc,) = ran
    assert proc.returncode == 0, proc.stderr
    assert "out=outputs/result (from --out)" in proc.stdout
    assert outcome.ok and outcome.result_text is not None
    result = ProbeResult.from_json(outcome.result_text)
    assert result.ok and result.batch_size == 32 and result.device == "cpu"  # no GPU here
    assert result.fingerprint["remote_job"] == {"layout": "azure-ml", "job": name}
