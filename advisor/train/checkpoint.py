"""Per-epoch checkpoints of ``advisor.train``, where each service keeps them across restarts.

A spot trial that loses its machine is restarted by the service; it resumes from the last
finished epoch instead of starting over. Where the checkpoints live:

- SageMaker: ``/opt/ml/checkpoints`` (synced to ``CheckpointConfig.S3Uri`` and restored on
  restart); used when the folder exists (SageMaker creates it when checkpoints are configured);
- Vertex AI: ``$AIP_CHECKPOINT_DIR`` (``gs://...``), read and written through Cloud Storage
  FUSE at ``/gcs/BUCKET/...``;
- Azure ML and anywhere else: ``--checkpoint-dir`` (the Azure request passes a job output
  mounted read-write).

A checkpoint holds the model, optimizer and scheduler state, the epochs done and the metrics
reported so far; it is written to a temporary file and renamed, so a kill mid-write leaves the
previous checkpoint intact. A sharded run (ZeRO-1, FSDP: ``advisor.probes.sharding``) gathers
the whole state first (every process calls ``save``; rank 0 writes), so a checkpoint always
holds the whole model; FSDP's optimizer state is kept by parameter name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FILE = "advisor-checkpoint.pt"


def opt_ml() -> Path:
    """Root of SageMaker's container layout (``ADVISOR_OPT_ML`` overrides ``/opt/ml`` to run the
    entry point outside a SageMaker container)."""
    return Path(os.environ.get("ADVISOR_OPT_ML", "/opt/ml"))


def checkpoint_dir(explicit: str | None, env: Mapping[str, str] | None = None) -> Path | None:
    """The folder to checkpoint in under this service's conventions, or None for none."""
    env = os.environ if env is None else env
    if explicit:
        return Path(explicit)
    vertex = env.get("AIP_CHECKPOINT_DIR")
    if vertex:
        return (
            Path("/gcs") / vertex.removeprefix("gs://")
            if vertex.startswith("gs://")
            else Path(vertex)
        )
    sagemaker = opt_ml() / "checkpoints"
    if sagemaker.is_dir():
        return sagemaker
    return None


def save(
    folder: Path, setup: Any, epochs_done: int, history: list[dict[str, float]], write: bool = True
) -> Path:
    """Write the checkpoint after ``epochs_done`` epochs (``write`` False: a sharded run's
    other processes, which only help gather the state); return its path."""
    import torch

    from advisor.probes import sharding

    path = folder / FILE
    by_name = False
    if sharding.is_sharded(setup):
        weights, optim, by_name = sharding.full_state(setup)
    else:
        weights = getattr(setup.model, "module", setup.model).state_dict()  # unwrap DDP
        optim = setup.optimizer.state_dict()
    if not write:
        return path
    folder.mkdir(parents=True, exist_ok=True)
    state = {
        "epochs_done": epochs_done,
        "history": history,
        "model": weights,
        "optimizer": optim,
        "optimizer_by_name": by_name,
        "scheduler": setup.scheduler.state_dict() if setup.scheduler is not None else None,
        "rng": torch.get_rng_state(),
    }
    tmp = folder / (FILE + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load(folder: Path | None, setup: Any) -> tuple[int, list[dict[str, float]]]:
    """Restore ``setup`` from the folder's checkpoint; return (epochs done, metrics so far).
    (0, []) when there is none."""
    if folder is None or not (folder / FILE).is_file():
        return 0, []
    import torch

    state = torch.load(folder / FILE, map_location="cpu", weights_only=False)
    model = getattr(setup.model, "module", setup.model)
    model.load_state_dict(state["model"])
    if state.get("optimizer_by_name"):
        from advisor.probes.sharding import load_by_name

        load_by_name(model, setup.optimizer, state["optimizer"])
    else:
        setup.optimizer.load_state_dict(state["optimizer"])
    if setup.scheduler is not None and state.get("scheduler") is not None:
        setup.scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["rng"])
    return int(state["epochs_done"]), list(state.get("history") or [])
