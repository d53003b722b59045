"""The export tests' study (issue #37): four machines of three clouds on a replay table
(plausible run times, no probe), and helpers to drive `advisor export` on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisor.probes.result import Interval
from advisor.providers.catalog._types import InstanceType
from cli_run import run

from advisor.evaluation.replay import ReplayEntry, ReplayTable

# key -> provider, accelerator, count, on demand / spot USD per hour (2025 list prices, rounded),
# region; run times in seconds for 10 epochs at batch 256 / 512.
MACHINES: dict[str, tuple[str, str | None, int, float, float | None, str]] = {
    "ec2:g5.12xlarge": ("aws", "A10G", 4, 5.67, 2.05, "us-east-1"),
    "compute-engine:n1-standard-8+1xT4": ("gcp", "T4", 1, 0.73, 0.32, "us-central1"),
    "azure-vm:NC24ads_A100_v4": ("azure", "A100-80GB", 1, 3.67, 0.90, "eastus"),
    "sagemaker:ml.g5.xlarge": ("aws", "A10G", 1, 1.41, None, "us-east-1"),
}
TIMES = {
    "ec2:g5.12xlarge": (500.0, 300.0),
    "compute-engine:n1-standard-8+1xT4": (2400.0, 2200.0),
    "azure-vm:NC24ads_A100_v4": (600.0, 450.0),
    "sagemaker:ml.g5.xlarge": (1500.0, 1300.0),
}
SPACE = (
    "workload: fcn\nbatch_sizes: [256, 512]\nmachines:\n  include_local: false\n"
    "hyperparameters:\n  lr: {type: float, low: 0.01, high: 0.3, log: true}\n"
    "  dropout: {type: categorical, choices: [0.1, 0.25], affects_runtime: true}\n"
)


def table() -> ReplayTable:
    insts = tuple(
        InstanceType(
            prov,
            key.split(":")[0],
            key.split(":")[1],
            8 * gpus,
            61.0 * gpus,
            acc,
            gpus,
            24.0,
            price,
            spot,
            "2025-12",
            "docs/method.md section 5",
            region,
        )
        for key, (prov, acc, gpus, price, spot, region) in MACHINES.items()
    )
    entries = tuple(
        ReplayEntry(
            m,
            b,
            Interval(t, t * 0.95, t * 1.05),
            predicted=Interval(t * 1.1, t * 0.8, t * 1.4),
            probe_s=30.0,
        )
        for m, times in TIMES.items()
        for b, t in zip((256, 512), times, strict=True)
    )
    return ReplayTable(insts, entries, snapshot="test-2021-02", epochs=10)


def export_cli(study: dict[str, Any], *args: str) -> Any:
    return run("export", "--study", study["report"]["study"], "--storage", study["storage"], *args)


def row_number(report: dict[str, Any], provider: str) -> int:
    """The first ranked row (1-based) on ``provider``'s machines."""
    return next(i for i, r in enumerate(report["ranking"], 1) if r["provider"] == provider)


def written(path: Path) -> str:
    return path.read_text(encoding="utf-8")
