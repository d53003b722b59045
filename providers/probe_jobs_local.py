"""The ``local`` remote back end: a probe job emulated on this machine (issue #14).

``LocalJobRunner(service)`` runs the exact job command (``ProbeJobSpec.command``) here, in a
subprocess, with the environment layout ``service``'s container gets, each folder in a
temporary job folder:

- ``sagemaker``: ``SM_MODEL_DIR`` (``<job>/opt_ml/model``), ``SM_OUTPUT_DATA_DIR``,
  ``SM_CHECKPOINT_DIR``, ``SM_CURRENT_HOST=algo-1``, ``SM_HOSTS``, ``TRAINING_JOB_NAME``,
  ``ADVISOR_OPT_ML`` (the ``/opt/ml`` root ``advisor.train`` reads);
- ``vertex``: ``AIP_MODEL_DIR=gs://<bucket>/<job>/model`` (the bucket of ``spec.output``),
  with the Cloud Storage FUSE mount ``/gcs`` emulated by a folder (``ADVISOR_GCS_MOUNT``),
  ``AIP_CHECKPOINT_DIR``, ``AIP_TENSORBOARD_LOG_DIR``, ``CLOUD_ML_JOB_ID``;
- ``azure-ml``: ``${{outputs.result}}`` in the command replaced by ``<job>/outputs/result``
  (appended as ``--out`` when the command lacks it, as the Azure ML runner does),
  ``AZUREML_RUN_ID``, ``AZUREML_EXPERIMENT_NAME``.

The image's ``python`` is this interpreter (``sys.executable``). ``max_runtime_s`` is enforced
as the services do: past it the process group is killed and the job ends ``stopped``. The
result file is read from the folder the service would have uploaded.

What it measures is THIS machine, never the catalog machine named in the spec: the outcome says
``service == "local"`` and ``billed_source`` starts with "emulated", so that nobody mistakes an
emulated probe for a measurement on that machine. Billing: the wall time on this machine, billed
with the emulated machine's billing rule at the emulated machine's list price -- what the probe
*would* have cost there had it run as long -- so that probe-budget logic runs for real; it is a
label, not a charge (no money is spent).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from advisor.providers import registry
from advisor.providers.catalog import InstanceType
from advisor.providers.probe_jobs import (
    AZUREML_OUTPUT,
    RESULT_FILE,
    JobPoll,
    ProbeJobRunner,
    ProbeJobSpec,
    job_command,
)

from advisor.errors import AdvisorError

LAYOUTS = tuple(p.managed_service for p in registry.PROVIDERS)
# A back end's name or a VM service -> the managed service whose layout its jobs have.
_ALIASES = {
    alias: p.managed_service for p in registry.PROVIDERS for alias in (p.backend, p.vm_service)
}
# Variables a managed container would not inherit from this shell (stripped from the job's env).
_CLOUD_PREFIXES = ("SM_", "AIP_", "CLOUD_ML_", "AZUREML_", "AZURE_ML_", "MLFLOW_")


@dataclass
class _Job:
    proc: subprocess.Popen[bytes]
    folder: Path
    result_dir: Path
    spec: ProbeJobSpec
    created_at: float
    started_at: float
    ended_at: float | None = None
    stopped: str | None = None
    waiter: threading.Thread | None = field(default=None, repr=False)


class LocalJobRunner(ProbeJobRunner):
    """Emulates ``service``'s probe job here (see the module docstring). ``workdir`` holds one
    folder per job (default: a new temporary folder); ``python`` stands for the image's."""

    name: ClassVar[str] = "local"
    providers: ClassVar[tuple[str, ...]] = (*registry.catalog_providers(), registry.LOCAL)
    START_ALLOWANCE_S: ClassVar[float] = 30.0

    def __init__(
        self,
        service: str = "sagemaker",
        workdir: str | Path | None = None,
        poll_s: float = 0.2,
        python: str = sys.executable,
    ) -> None:
        super().__init__(poll_s=poll_s)
        service = _ALIASES.get(service, service)
        if service not in LAYOUTS:
            raise AdvisorError(
                f"No local layout for service '{service}'.", f"use one of {', '.join(LAYOUTS)}."
            )
        self.service = service
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="advisor-jobs-"))
        self.python = python
        self._jobs: dict[str, _Job] = {}

    @property
    def layout(self) -> str:
        return self.service

    def can_run(self, machine: InstanceType) -> bool:
        """Any machine: the job runs here whatever it names (the timings are this machine's)."""
        return True

    def check(self) -> None:
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AdvisorError(
                f"Cannot create the local job folder {self.workdir}: {exc.strerror}.",
                "pass a writable workdir.",
            ) from exc

    # -- the job ---------------------------------------------------------------------------
    def environment(
        self, job_id: str, folder: Path, spec: ProbeJobSpec
    ) -> tuple[dict[str, str], Path]:
        """The job's variables in ``service``'s layout, and the folder the result goes to."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(_CLOUD_PREFIXES)}
        env.update({"PYTHONUNBUFFERED": "1", **spec.env})
        if self.service == "sagemaker":
            root = folder / "opt_ml"
            result = root / "model"
            env.update(
                ADVISOR_OPT_ML=str(root),
                SM_MODEL_DIR=str(result),
                SM_OUTPUT_DATA_DIR=str(root / "output" / "data"),
                SM_CHECKPOINT_DIR=str(root / "checkpoints"),
                SM_CURRENT_HOST="algo-1",
                SM_HOSTS=json.dumps(["algo-1"]),
                SM_NUM_GPUS=str(spec.machine.accelerator_count),
                TRAINING_JOB_NAME=job_id,
            )
        elif self.service == "vertex":
            bucket = _bucket(spec.output) or "advisor-local"
            mount = folder / "gcs"
            result = mount / bucket / job_id / "model"
            env.update(
                ADVISOR_GCS_MOUNT=str(mount),
                AIP_MODEL_DIR=f"gs://{bucket}/{job_id}/model",
                AIP_CHECKPOINT_DIR=f"gs://{bucket}/{job_id}/checkpoints",
                AIP_TENSORBOARD_LOG_DIR=f"gs://{bucket}/{job_id}/logs",
                CLOUD_ML_JOB_ID=job_id,
            )
        else:  # azure-ml
            result = folder / "outputs" / "result"
            env.update(AZUREML_RUN_ID=job_id, AZUREML_EXPERIMENT_NAME="advisor-probes")
        return env, result

    def command(self, spec: ProbeJobSpec, result_dir: Path) -> list[str]:
        """The job's argv here: ``python`` is this interpreter, Azure's output placeholder is
        the job's result folder."""
        argv = list(job_command(spec.command, self.service))
        if argv[0] in ("python", "python3"):
            argv[0] = self.python
        return [a.replace(AZUREML_OUTPUT, str(result_dir)) for a in argv]

    def _submit(self, spec: ProbeJobSpec) -> str:
        job_id = spec.job_name
        if (self.workdir / job_id).exists():  # names are unique per service; here per folder
            job_id = f"{job_id}-{uuid.uuid4().hex[:6]}"
        folder = self.workdir / job_id
        folder.mkdir(parents=True)
        env, result_dir = self.environment(job_id, folder, spec)
        created = time.time()
        with (folder / "job.log").open("wb") as log:
            proc = subprocess.Popen(
                self.command(spec, result_dir),
                cwd=folder,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a stop takes the probe too
            )
        job = _Job(proc, folder, result_dir, spec, created, time.time())
        job.waiter = threading.Thread(target=self._wait, args=(job,), daemon=True)
        job.waiter.start()
        self._jobs[job_id] = job
        return job_id

    @staticmethod
    def _wait(job: _Job) -> None:
        job.proc.wait()
        job.ended_at = time.time()

    def _poll(self, job_id: str) -> JobPoll:
        job = self._jobs[job_id]
        limit = job.spec.max_runtime_s
        if job.ended_at is None and time.time() - job.started_at > limit:
            self._kill(job, f"MaxRuntimeInSeconds ({limit} s) reached: stopped")
        if job.ended_at is None:
            return JobPoll("running", job.created_at, job.started_at)
        if job.stopped is not None:
            state, message = "stopped", job.stopped
        elif job.proc.returncode == 0:
            state, message = "completed", None
        else:
            state, message = "failed", f"exit code {job.proc.returncode}: {self.log_tail(job_id)}"
        return JobPoll(state, job.created_at, job.started_at, job.ended_at, message=message)

    def _fetch(self, job_id: str, spec: ProbeJobSpec) -> str | None:
        path = self._jobs[job_id].result_dir / RESULT_FILE
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def _stop(self, job_id: str) -> None:
        self._kill(self._jobs[job_id], "stopped by the caller")

    def _kill(self, job: _Job, why: str) -> None:
        job.stopped = why
        with contextlib.suppress(ProcessLookupError):  # it had ended already
            os.killpg(job.proc.pid, signal.SIGKILL)
        if job.waiter is not None:
            job.waiter.join(timeout=10)

    def _billing_note(self, spec: ProbeJobSpec, source: str) -> str:
        return (
            f"emulated on this machine as {self.service} ({source}); "
            f"priced at {spec.machine.key}'s list price, nothing spent"
        )

    # -- for callers and tests -------------------------------------------------------------
    def folder(self, job_id: str) -> Path:
        """The job's folder here (its log, its layout's folders)."""
        return self._jobs[job_id].folder

    def log_tail(self, job_id: str, lines: int = 1) -> str:
        """The last ``lines`` non-empty lines of the job's log."""
        path = self._jobs[job_id].folder / "job.log"
        text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        return " | ".join([ln for ln in text.splitlines() if ln.strip()][-lines:])


def _bucket(output: str | None) -> str | None:
    if output and output.startswith("gs://"):
        return output.removeprefix("gs://").split("/", 1)[0] or None
    return None
