"""The container side of a remote probe (issue #14): ``python -m advisor.probes.job_entry``.

A remote probe is a short managed training job (SageMaker, Vertex AI, Azure ML) in the
advisor's image whose command is::

    python -m advisor.probes.job_entry --request '<ProbeRequest JSON>' [--out DIR]

(the JSON may come in several arguments, joined as they are: SageMaker takes at most 256
characters per container argument).

It runs the probe exactly as a local probe runs (:func:`advisor.probes.runner.run_probe`: a
child process, its time-out, failures as results), with ``device: "auto"`` resolved on the
machine (CUDA when the framework sees a GPU, else the CPU, like ``advisor.train --device
auto``), and writes the :class:`~advisor.probes.result.ProbeResult` JSON as
``RESULT_FILE`` into the folder whose files the service keeps:

- ``--out DIR`` (Azure ML passes its ``${{outputs.result}}`` folder),
- else ``$SM_MODEL_DIR`` (set by the sagemaker-training toolkit, which the advisor image does
  not install, and by the local emulation),
- else, on SageMaker itself -- ``$TRAINING_JOB_NAME`` set, as SageMaker sets it in every
  training container ("How Amazon SageMaker AI Provides Training Information") -- the folder
  SageMaker uploads as ``model.tar.gz``: ``/opt/ml/model`` (API reference, ModelArtifacts:
  "A SageMaker container stores your trained model artifacts in the /opt/ml/model
  directory"; issue #27; ``$ADVISOR_OPT_ML`` moves ``/opt/ml`` for the local emulation, as
  ``advisor.train`` reads it),
- else ``$AIP_MODEL_DIR`` (Vertex AI sets it from the job's ``base_output_directory``; a
  ``gs://bucket/path`` value is read and written through the Cloud Storage FUSE mount
  ``/gcs/bucket/path``; ``$ADVISOR_GCS_MOUNT`` moves that root, for the local emulation),
- else it stops with one line naming the fix.

Exit status 0 whenever the result file was written, even for a failed probe (the failure is in
the JSON, as for local probes); 2 for a bad request or no output folder; 1 when the file could
not be written.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.providers.probe_jobs import ENTRY_OUTPUT_ENV, RESULT_FILE

LOG_PREFIX = "advisor-probe-job:"
GCS_MOUNT_ENV = "ADVISOR_GCS_MOUNT"  # where gs:// paths are mounted (Vertex: /gcs)
SAGEMAKER_JOB_ENV = "TRAINING_JOB_NAME"  # set by SageMaker in every training container
OPT_ML_ENV = "ADVISOR_OPT_ML"  # moves /opt/ml, for the local emulation (as advisor.train reads)


@dataclass(frozen=True)
class ServicePaths:
    """The fixed paths a service's container provides: SageMaker's model folder (uploaded to
    S3 after the job) and Vertex AI's Cloud Storage FUSE mount (tests point them elsewhere)."""

    sagemaker_model: Path = Path("/opt/ml/model")
    gcs_mount: Path = Path("/gcs")


class EntryError(Exception):
    """A problem that leaves nothing to write: one line, exit status ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def output_dir(
    out: str | None, env: dict[str, str] | None = None, paths: ServicePaths = ServicePaths()
) -> tuple[Path, str]:
    """The folder the result goes to and where that came from (``--out``, a variable, the
    service's own folder): see the module docstring for the order."""
    env = dict(os.environ) if env is None else env
    if out:
        return Path(out), "--out"
    toolkit = env.get(ENTRY_OUTPUT_ENV["sagemaker"], "").strip()
    if toolkit:
        return Path(toolkit), f"${ENTRY_OUTPUT_ENV['sagemaker']}"
    if env.get(SAGEMAKER_JOB_ENV, "").strip():  # SageMaker itself: its model folder
        moved = env.get(OPT_ML_ENV, "").strip()  # the local emulation's /opt/ml
        folder = Path(moved) / "model" if moved else paths.sagemaker_model
        return folder, f"SageMaker's model folder (${SAGEMAKER_JOB_ENV} set)"
    var = ENTRY_OUTPUT_ENV["vertex"]
    value = env.get(var, "").strip()
    if value:
        return _local_path(value, env, paths), f"${var}"
    raise EntryError(
        f"{LOG_PREFIX} no output folder: pass --out DIR, or run where SageMaker "
        f"(${SAGEMAKER_JOB_ENV}) or Vertex AI (${var}) provides one."
    )


def _local_path(value: str, env: dict[str, str], paths: ServicePaths = ServicePaths()) -> Path:
    """A ``gs://bucket/path`` as its Cloud Storage FUSE path (``/gcs/bucket/path``)."""
    if value.startswith("gs://"):
        root = Path(env[GCS_MOUNT_ENV]) if env.get(GCS_MOUNT_ENV) else paths.gcs_mount
        return root / value.removeprefix("gs://")
    return Path(value)


# The device files a GPU driver makes (NVIDIA's, AMD ROCm's, WSL's): a framework sees a GPU
# only through one of them, and a GPU container gets them from its runtime.
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")


def resolve_device(
    device: str, framework: str, device_files: tuple[str, ...] = GPU_DEVICE_FILES
) -> tuple[str, str]:
    """``device`` as the probe runs it, and why: "auto" is CUDA when the framework sees a GPU
    on this machine, else the CPU (``advisor.train``'s ``--device auto`` rule). Without any
    GPU driver's device file the answer is the CPU without importing the framework (the
    probe's child imports it again: 2-6 s of a billed job's time)."""
    if device != "auto":
        return device, "asked for"
    if not any(os.path.exists(f) for f in device_files):
        return "cpu", f"auto: no GPU visible, no GPU driver here ({', '.join(device_files)})"
    gpus = _visible_gpus(framework)
    if gpus:
        return "cuda", f"auto: {gpus} GPU(s) visible"
    return "cpu", "auto: no GPU visible"


def _visible_gpus(framework: str) -> int:
    try:
        if framework == "keras":
            import tensorflow as tf

            return len(tf.config.list_physical_devices("GPU"))
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        return 0


def parse_request(text: str) -> ProbeRequest:
    """The request from its JSON text; a bad one raises ``EntryError`` with one line."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError("the request must be a JSON object")
        return ProbeRequest(**data)
    except (ValueError, TypeError) as exc:
        raise EntryError(f"{LOG_PREFIX} bad --request: {' '.join(str(exc).split())}") from None


def run(request: ProbeRequest, folder: Path, job: dict[str, str]) -> ProbeResult:
    """Run the probe here and write its result into ``folder``; return the result."""
    from advisor.probes.runner import run_probe

    result = run_probe(request)
    # Where it ran, for whoever reads the file back (the job's own name and layout).
    result = dataclasses.replace(result, fingerprint={**result.fingerprint, "remote_job": job})
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{RESULT_FILE}.tmp"
        tmp.write_text(result.to_json() + "\n", encoding="utf-8")
        tmp.replace(folder / RESULT_FILE)
    except OSError as exc:
        raise EntryError(f"{LOG_PREFIX} cannot write {folder / RESULT_FILE}: {exc}", 1) from None
    return result


def job_identity(env: dict[str, str]) -> dict[str, str]:
    """The managed job this runs in, from the service's own variables (empty when none)."""
    for service, var in (
        ("sagemaker", "TRAINING_JOB_NAME"),
        ("vertex", "CLOUD_ML_JOB_ID"),
        ("azure-ml", "AZUREML_RUN_ID"),
    ):
        if env.get(var):
            return {"layout": service, "job": env[var]}
    return {}


def main(
    argv: list[str] | None = None,
    env: dict[str, str] | None = None,
    paths: ServicePaths = ServicePaths(),
) -> int:
    """The job's command; ``env`` (default: this process's environment) and ``paths`` are
    what the service provides (tests pass a service's own set)."""
    env = dict(os.environ) if env is None else env
    parser = argparse.ArgumentParser(
        prog="python -m advisor.probes.job_entry",
        description="Run one probe in a managed training job and write its result file.",
    )
    parser.add_argument(
        "--request",
        required=True,
        nargs="+",
        help="ProbeRequest as JSON; several arguments are joined (SageMaker takes at most 256 "
        "characters per argument, so a long request comes in pieces).",
    )
    parser.add_argument("--out", default=None, help="Folder for the result file.")
    args = parser.parse_args(argv)
    try:
        request = parse_request("".join(args.request))
        folder, origin = output_dir(args.out, env, paths)
        device, why = resolve_device(request.device, request.framework)
        request = dataclasses.replace(request, device=device)
        print(f"{LOG_PREFIX} device={device} ({why}) out={folder} (from {origin})", flush=True)
        result = run(request, folder, job_identity(env))
    except EntryError as exc:
        print(str(exc), file=sys.stderr, flush=True)
        return exc.code
    what = "ok" if result.ok else f"{result.status}: {result.reason}"
    print(f"{LOG_PREFIX} probe {what}; wrote {folder / RESULT_FILE}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
