"""Remote probes on Azure ML (issue #14): one probe as a short ``command`` job.

The job runs the probe command in the advisor's image (an inline image, registered by the SDK
as an anonymous environment, or an existing ``azureml:NAME:VERSION`` environment, as for
sweeps in ``providers/azureml.py``) for at most ``max_runtime_s`` (``limits.timeout``):

- on serverless compute with ``resources.instance_type`` = the candidate's VM size (Azure ML
  picks that VM for the job alone) and ``queue_settings.job_tier`` Spot or Standard; or
- on a named compute cluster, after checking that its VM size is the candidate's and its tier
  (dedicated / low priority) is the one asked for: a probe on other hardware, or priced at a
  spot price it did not run at, would be a wrong measurement.

The entry writes ``RESULT_FILE`` to ``outputs/result`` under the job's working directory:
Azure ML uploads the working directory's ``outputs`` folder as the job's artifacts, and the
job's MLflow run (its id is the job name) hands it back through ``mlflow``'s artifact API.
That path, not ``jobs.download`` of a named output, because the latter needs the run-history
data plane and blob storage over TLS with bearer tokens, which cannot be served honestly by a
local test server, while an MLflow store can be run for real (``tracking_uri``; default: the
workspace's, which needs the ``azureml-mlflow`` plugin: checked before anything is started).

Times: ``creation_context.created_at`` (accepted) from the job; start and end of the run from
its MLflow run (Azure's run history ``startTimeUtc`` / ``endTimeUtc``). Azure reports no
billed seconds: the base class bills start..end with the per-minute rule of
``providers/pricing.py``.
"""

from __future__ import annotations

import os
import shlex
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from advisor.providers.azureml import AzureMLBackend, azure_call, unnamed_workspace_parts
from advisor.providers.probe_jobs import (
    RESULT_FILE,
    JobPoll,
    JobState,
    ProbeJobRunner,
    ProbeJobSpec,
)

from advisor._lazy import require
from advisor.errors import AdvisorError

FEATURE = "Azure ML probe jobs"
EXPERIMENT = "advisor-probes"
RESULT_DIR = "outputs/result"  # under the job's working directory; uploaded as artifacts
STATES: dict[str, JobState] = {
    "Running": "running",
    "Finalizing": "running",
    "CancelRequested": "running",
    "Completed": "completed",
    "Failed": "failed",
    "NotResponding": "failed",
    "Canceled": "stopped",
}


class AzureMLProbeJobRunner(ProbeJobRunner):
    """Probe jobs as Azure ML command jobs in one workspace.

    ``subscription`` / ``resource_group`` / ``workspace`` default to AZURE_SUBSCRIPTION_ID /
    AZURE_RESOURCE_GROUP / AZUREML_WORKSPACE_NAME; ``compute`` is a compute cluster of the
    candidate's VM size (None: serverless compute). ``ml_client`` (an ``MLClient``) is built
    lazily with ``credential`` (default: ``DefaultAzureCredential``); ``tracking_uri`` is the
    MLflow store the job's artifacts are read from (default: the workspace's).
    """

    name: ClassVar[str] = "azure-ml"
    providers: ClassVar[tuple[str, ...]] = ("azure",)

    def __init__(
        self,
        subscription: str | None = None,
        resource_group: str | None = None,
        workspace: str | None = None,
        compute: str | None = None,
        ml_client: Any = None,
        credential: Any = None,
        poll_s: float = 15.0,
        tracking_uri: str | None = None,
        experiment: str = EXPERIMENT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(poll_s=poll_s, clock=clock)
        self.subscription = subscription or os.environ.get("AZURE_SUBSCRIPTION_ID")
        self.resource_group = resource_group or os.environ.get("AZURE_RESOURCE_GROUP")
        self.workspace = workspace or os.environ.get("AZUREML_WORKSPACE_NAME")
        self.compute = compute
        self.credential = credential
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self._client = ml_client

    # -- settings ---------------------------------------------------------------------------
    def check(self) -> None:
        if self._client is None:
            missing = [f"{name} ({env})" for name, env in unnamed_workspace_parts(self)]
            if missing:
                raise AdvisorError(
                    "The Azure ML workspace for probe jobs is not fully named.",
                    f"set the {', '.join(missing)} in the azure-ml cloud settings.",
                )
        if self.tracking_uri is None:
            try:
                import azureml.mlflow  # noqa: F401  (the azureml:// tracking and artifact scheme)
            except ImportError as exc:
                raise AdvisorError(
                    "Reading an Azure ML probe job's result needs the 'azureml-mlflow' package.",
                    "pip install azureml-mlflow (in an environment without the aws extra).",
                ) from exc
        require("mlflow", "azure", FEATURE)

    @property
    def client(self) -> Any:
        """The ``MLClient`` (built on first use)."""
        if self._client is None:
            if self.credential is None:
                backend = AzureMLBackend(
                    subscription=self.subscription,
                    resource_group=self.resource_group,
                    workspace=self.workspace,
                )
                self._client = backend.client  # DefaultAzureCredential, as for sweeps
            else:
                ml = require("azure.ai.ml", "azure", FEATURE)
                self._client = ml.MLClient(
                    self.credential,
                    subscription_id=self.subscription,
                    resource_group_name=self.resource_group,
                    workspace_name=self.workspace,
                )
        return self._client

    # -- the job ----------------------------------------------------------------------------
    def vm_size(self, spec: ProbeJobSpec) -> str:
        """The Azure VM size of the spec's machine (``Standard_...``)."""
        return AzureMLBackend._map_type(spec.machine.service, spec.machine.instance_type)

    def job(self, spec: ProbeJobSpec) -> Any:
        """The SDK's command job for ``spec`` (serverless or on ``compute``)."""
        ml = require("azure.ai.ml", "azure", FEATURE)
        entities = require("azure.ai.ml.entities", "azure", FEATURE)
        environment: Any = (
            spec.image
            if spec.image.startswith("azureml:")
            else entities.Environment(image=spec.image)
        )
        argv = _without_out(spec.command)
        placement: dict[str, Any] = {"compute": self.compute}
        if self.compute is None:  # serverless: this VM size, this tier, for this job alone
            placement = {
                "instance_type": self.vm_size(spec),
                "job_tier": "Spot" if spec.spot else "Standard",
            }
        return ml.command(
            name=spec.job_name,
            display_name=spec.job_name,
            experiment_name=self.experiment,
            # Azure ML runs ``command`` in a shell: quote each argument (the request is JSON).
            command=" ".join(shlex.quote(a) for a in (*argv, "--out", RESULT_DIR)),
            environment=environment,
            environment_variables=dict(spec.env),
            timeout=spec.max_runtime_s,
            tags={"advisor:probe": "1", "advisor:machine": spec.machine.key},
            **placement,
        )

    def _check_cluster(self, spec: ProbeJobSpec) -> None:
        """The named cluster runs the candidate's VM size at the tier asked for."""
        cluster = _call(self.client.compute.get, self.compute)
        size = str(getattr(cluster, "size", "") or "")
        if size.lower() != self.vm_size(spec).lower():
            raise AdvisorError(
                f"Compute cluster '{self.compute}' runs {size or 'an unknown VM size'}, "
                f"not {self.vm_size(spec)}: the probe would time other hardware.",
                "name a cluster of that VM size, or leave compute unset (serverless).",
            )
        low_priority = str(getattr(cluster, "tier", "") or "").lower() == "low_priority"
        if low_priority != spec.spot:
            want, have = ("spot", "dedicated") if spec.spot else ("on-demand", "low-priority")
            raise AdvisorError(
                f"A {want} probe asked for, but cluster '{self.compute}' is {have}.",
                "name a cluster of the matching tier, or leave compute unset (serverless).",
            )

    def _submit(self, spec: ProbeJobSpec) -> str:
        if self.compute is not None:
            self._check_cluster(spec)
        job = _call(self.client.jobs.create_or_update, self.job(spec), skip_validation=True)
        return str(job.name)

    def _poll(self, job_id: str) -> JobPoll:
        job = _call(self.client.jobs.get, job_id)
        status = str(getattr(job.status, "value", job.status))  # a JobStatus enum or a str
        state = STATES.get(status, "pending")
        created = getattr(job.creation_context, "created_at", None)
        started = ended = None
        if state != "pending":
            started, ended = self._run_times(job_id)
        message = None
        if state in ("failed", "stopped"):
            where = f"; its logs: {job.studio_url}" if getattr(job, "studio_url", None) else ""
            message = f"Azure ML job {job_id} {status}{where}"
        return JobPoll(
            state=state,
            created_at=created.timestamp() if created is not None else None,
            started_at=started,
            ended_at=ended if state in ("completed", "failed", "stopped") else None,
            message=message,
        )

    def _run_times(self, job_id: str) -> tuple[float | None, float | None]:
        """Start and end (unix s) of the job's run, from its MLflow run (None: not yet)."""
        mlflow = require("mlflow", "azure", FEATURE)
        try:
            info = mlflow.MlflowClient(self._tracking_uri()).get_run(job_id).info
        except mlflow.exceptions.MlflowException:
            return None, None
        start = info.start_time / 1000 if info.start_time else None
        end = info.end_time / 1000 if info.end_time else None
        return start, end

    def _fetch(self, job_id: str, spec: ProbeJobSpec) -> str | None:
        mlflow = require("mlflow", "azure", FEATURE)
        path = f"{RESULT_DIR}/{RESULT_FILE}"
        with tempfile.TemporaryDirectory(prefix="advisor-azureml-") as tmp:
            try:
                local = mlflow.artifacts.download_artifacts(
                    run_id=job_id,
                    artifact_path=path,
                    dst_path=tmp,
                    tracking_uri=self._tracking_uri(),
                )
            except (mlflow.exceptions.MlflowException, OSError):
                return None
            file = Path(local)
            return file.read_text(encoding="utf-8") if file.is_file() else None

    def _stop(self, job_id: str) -> None:
        _call(self.client.jobs.begin_cancel, job_id)

    def _tracking_uri(self) -> str:
        if self.tracking_uri is None:
            workspace = _call(self.client.workspaces.get, self.client.workspace_name)
            self.tracking_uri = str(workspace.mlflow_tracking_uri)
        return self.tracking_uri


def _without_out(command: tuple[str, ...]) -> list[str]:
    """The command without an ``--out DIR`` of its own (the job's folder is ours to name)."""
    out: list[str] = []
    skip = False
    for arg in command:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            out.append(arg)
    return out


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    return azure_call(fn, *args, feature=FEATURE, **kwargs)
