"""The one command every exported and submitted job runs: ``python -m advisor.train ...``.

``advisor export`` (a SkyPilot task, a SageMaker, Vertex AI or Azure ML training job) and
``advisor submit`` (each trial of a managed tuning job) both build the entry point's values
here, from the row the report chose: the workload, the global batch size, the epochs, the
training plan the row was predicted under (``--plan precision=...,accumulation=...,
checkpointing=...,sharding=...``, ``TrainingPlan.arg()``), the hyperparameters, the device,
and what the report predicted for it (``--expect-peak-gib``, ``--expect-peak-high-gib``,
``--expect-step-s``), which ``advisor.train`` prints beside what it measures.

``train_values`` gives them as ``name -> text`` (SageMaker's static hyperparameters take them
so); ``train_args`` as the command line's ``--name value`` pairs. Nothing here imports a cloud
SDK or the prediction models: the plan comes as its ``--plan`` text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

ENTRY_POINT: tuple[str, ...] = ("python", "-m", "advisor.train")
# The head machine's rendezvous port where a launcher names none (issue #49): torchrun's default.
TORCHRUN_PORT = 29500
# The entry point's own options (``advisor.train.entry``): never passed to a workload builder.
EXPECT_OPTIONS = ("expect_peak_gib", "expect_peak_high_gib", "expect_step_s")


def _number(value: float) -> str:
    """A prediction as text: 4 significant digits ("110.7", "0.0123")."""
    return f"{float(value):.4g}"


def train_values(
    *,
    device: str,
    model: str | None = None,
    batch_size: int | None = None,
    epochs: int | None = None,
    plan: str | None = None,
    hyperparameters: Mapping[str, Any] | None = None,
    metric: str | None = None,
    expect_peak_gib: float | None = None,
    expect_peak_high_gib: float | None = None,
    expect_step_s: float | None = None,
    checkpoint_dir: str | None = None,
) -> dict[str, str]:
    """``advisor.train``'s values for one run, in the order they are written: the workload,
    batch size, epochs, plan, the hyperparameters (by name), the metric, the device, the
    predictions and the checkpoint folder. ``None`` leaves a value out (the entry point's
    default); a prediction that is not a finite positive number is left out too."""
    out: dict[str, str] = {}
    if model is not None:
        out["model"] = str(model)
    if batch_size is not None:
        out["batch_size"] = str(int(batch_size))
    if epochs is not None:
        out["epochs"] = str(int(epochs))
    if plan:
        out["plan"] = str(plan)
    for name, value in sorted((hyperparameters or {}).items()):
        out[name] = str(value)
    if metric is not None:
        out["metric"] = str(metric)
    out["device"] = device
    for name, value in zip(
        EXPECT_OPTIONS, (expect_peak_gib, expect_peak_high_gib, expect_step_s), strict=True
    ):
        if value is not None and math.isfinite(float(value)) and float(value) > 0:
            out[name] = _number(value)
    if checkpoint_dir:
        out["checkpoint_dir"] = str(checkpoint_dir)
    return out


def train_args(values: Mapping[str, str]) -> list[str]:
    """``--name value`` pairs of ``values`` (``batch_size`` -> ``--batch-size``)."""
    args: list[str] = []
    for name, value in values.items():
        args += [f"--{name.replace('_', '-')}", value]
    return args


def train_command(values: Mapping[str, str]) -> list[str]:
    """The whole command: ``python -m advisor.train`` and ``train_args(values)``."""
    return [*ENTRY_POINT, *train_args(values)]
