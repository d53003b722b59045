"""Remote probes on Vertex AI (issue #14): one probe as a short ``CustomJob``.

The job runs the probe command in the advisor's image on the candidate machine
(``MachineSpec`` with the catalog row's accelerator, mapped as for tuning jobs by
``providers/vertex.py``), at most ``max_runtime_s`` (``scheduling.timeout``), on Spot VMs when
asked (``scheduling.strategy = SPOT``). Its ``base_output_directory`` is
``<output>/<job name>``, so Vertex sets ``AIP_MODEL_DIR`` to ``<output>/<job name>/model/``:
the container writes ``RESULT_FILE`` there through the ``/gcs/`` Cloud Storage FUSE mount and
we read it back with ``google-cloud-storage`` (installed with google-cloud-aiplatform).

Vertex reports no billed seconds: ``start_time`` (the job first RUNNING) to ``end_time`` is
billed with Vertex's rule (``providers/pricing.py``, 30 s increments) by the base class.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from advisor.providers.probe_jobs import (
    RESULT_FILE,
    JobPoll,
    JobState,
    ProbeJobRunner,
    ProbeJobSpec,
)
from advisor.providers.vertex import VertexBackend, accelerator_enum, vertex_call

from advisor._lazy import require
from advisor.errors import AdvisorError

FEATURE = "Vertex AI probe jobs"
# aiplatform_v1.JobState names -> our states (anything else: pending).
STATES: dict[str, JobState] = {
    "JOB_STATE_RUNNING": "running",
    "JOB_STATE_SUCCEEDED": "completed",
    "JOB_STATE_FAILED": "failed",
    "JOB_STATE_EXPIRED": "failed",
    "JOB_STATE_PARTIALLY_SUCCEEDED": "failed",
    "JOB_STATE_CANCELLING": "running",
    "JOB_STATE_CANCELLED": "stopped",
}


class VertexProbeJobRunner(ProbeJobRunner):
    """Probe jobs as Vertex AI ``CustomJob``s in ``project`` / ``location``.

    ``output`` is the gs:// folder the jobs write under (one sub-folder per job). ``client``
    (an ``aiplatform_v1.JobServiceClient``) and ``storage`` (a ``google.cloud.storage.Client``)
    are built lazily for ``location`` with ``credentials`` (default: the environment's
    application default credentials) when not given. ``service_account`` runs the job as
    that account (it needs write access to ``output``).
    """

    name: ClassVar[str] = "vertex"
    providers: ClassVar[tuple[str, ...]] = ("gcp",)

    def __init__(
        self,
        project: str | None = None,
        location: str = "us-central1",
        output: str | None = None,
        client: Any = None,
        credentials: Any = None,
        service_account: str | None = None,
        poll_s: float = 15.0,
        storage: Any = None,
        clock: Callable[[], float] = time.time,
        feature: str = FEATURE,
    ) -> None:
        super().__init__(poll_s=poll_s, clock=clock)
        self.feature = feature  # what the jobs are for, in errors ("the Vertex AI export")
        self.project = project
        self.location = location
        self.output = output
        self.credentials = credentials
        self.service_account = service_account
        self._client = client
        self._storage = storage
        self._output_of: dict[str, str] = {}

    # -- settings ---------------------------------------------------------------------------
    def check(self) -> None:
        if not self.output or not self.output.startswith("gs://"):
            got = f", not {self.output!r}" if self.output else ""
            raise AdvisorError(
                f"{self.feature[0].upper()}{self.feature[1:]} write their result to Cloud "
                f"Storage{got}.",
                "pass a gs://BUCKET/PATH output folder (cloud settings: vertex output).",
            )
        if self.credentials is None and self._client is None:
            # The tuning back end finds the application default credentials and their
            # project, or raises the one-line error naming the fix.
            backend = VertexBackend(project=self.project, location=self.location)
            backend.identity()
            self.project = backend.project
        if not self.project:
            raise AdvisorError(
                f"No Google Cloud project is set for {self.feature}.",
                "pass a project or run `gcloud config set project PROJECT`.",
            )

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.location}"

    @property
    def client(self) -> Any:
        """The ``JobServiceClient`` (built on first use, as the tuning back end builds it)."""
        if self._client is None:
            if self.credentials is None:
                self._client = VertexBackend(project=self.project, location=self.location).client
            else:
                v1 = require("google.cloud.aiplatform_v1", "gcp", self.feature)
                self._client = v1.JobServiceClient(
                    credentials=self.credentials,
                    client_options={"api_endpoint": f"{self.location}-aiplatform.googleapis.com"},
                )
        return self._client

    @property
    def storage(self) -> Any:
        """The Cloud Storage client that reads the result file (built on first use)."""
        if self._storage is None:
            gcs = require("google.cloud.storage", "gcp", self.feature)
            self._storage = gcs.Client(project=self.project, credentials=self.credentials)
        return self._storage

    # -- the job ----------------------------------------------------------------------------
    def base_output(self, spec: ProbeJobSpec) -> str:
        """The job's ``base_output_directory``: its own folder under the output."""
        root = spec.output or self.output or ""
        return f"{root.rstrip('/')}/{spec.job_name}"

    def job(self, spec: ProbeJobSpec) -> Any:
        """The ``aiplatform_v1.CustomJob`` that runs ``spec``."""
        v1 = require("google.cloud.aiplatform_v1", "gcp", self.feature)
        row = spec.machine
        if row.accelerator is not None and row.accelerator.upper().startswith("TPU"):
            raise AdvisorError(
                f"{row.key} is a TPU machine; the advisor image runs on CUDA GPUs or the CPU "
                f"({self.feature}).",
                "pick a GPU or CPU machine.",
            )
        machine = v1.MachineSpec(
            machine_type=VertexBackend._map_type(row.service, row.instance_type)
        )
        if row.accelerator is not None:
            machine.accelerator_type = v1.AcceleratorType[accelerator_enum(row.accelerator)]
            machine.accelerator_count = row.accelerator_count
        container = v1.ContainerSpec(
            image_uri=spec.image,
            command=list(spec.command),
            env=[v1.EnvVar(name=k, value=v) for k, v in sorted(spec.env.items())],
        )
        scheduling = v1.Scheduling(timeout={"seconds": spec.max_runtime_s})
        if spec.spot:
            scheduling.strategy = v1.Scheduling.Strategy.SPOT
        job_spec = v1.CustomJobSpec(
            worker_pool_specs=[
                v1.WorkerPoolSpec(machine_spec=machine, replica_count=1, container_spec=container)
            ],
            scheduling=scheduling,
            base_output_directory=v1.GcsDestination(output_uri_prefix=self.base_output(spec)),
        )
        if self.service_account:
            job_spec.service_account = self.service_account
        return v1.CustomJob(
            display_name=spec.job_name,
            job_spec=job_spec,
            labels={"advisor-probe": "1"},
        )

    def _submit(self, spec: ProbeJobSpec) -> str:
        created = _call(
            self.client.create_custom_job, parent=self.parent, custom_job=self.job(spec)
        )
        name = str(created.name)
        self._output_of[name] = self.base_output(spec)
        return name

    def _poll(self, job_id: str) -> JobPoll:
        job = _call(self.client.get_custom_job, name=job_id)
        return JobPoll(
            state=STATES.get(job.state.name, "pending"),
            created_at=_unix(job.create_time),
            started_at=_unix(job.start_time),
            ended_at=_unix(job.end_time),
            message=job.error.message or None,
        )

    def _fetch(self, job_id: str, spec: ProbeJobSpec) -> str | None:
        base = self._output_of.get(job_id) or self.base_output(spec)
        bucket, _, prefix = base.removeprefix("gs://").partition("/")
        blob_name = f"{prefix}/model/{RESULT_FILE}" if prefix else f"model/{RESULT_FILE}"
        core = require("google.api_core.exceptions", "gcp", FEATURE)
        try:
            text: str = self.storage.bucket(bucket).blob(blob_name).download_as_text()
        except core.NotFound:
            return None
        except core.GoogleAPICallError as exc:
            raise AdvisorError(
                f"Cannot read gs://{bucket}/{blob_name}: {exc.message}",
                "check that your account can read the output bucket.",
            ) from exc
        return text

    def _stop(self, job_id: str) -> None:
        _call(self.client.cancel_custom_job, name=job_id)


def _unix(stamp: Any) -> float | None:
    """A protobuf timestamp as the SDK returns it (a datetime, or None when unset)."""
    if not stamp:
        return None
    return float(stamp.timestamp())


def _call(fn: Any, **kwargs: Any) -> Any:
    return vertex_call(fn, FEATURE, **kwargs)
