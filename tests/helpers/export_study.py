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


# Issue #45: a study whose rows carry a training plan, memory per device and a steady step, as
# the one prediction path records them (the recommendation of the GPT-2 Large run is
# 8x B200 at batch 256, bf16, 2 accumulation steps, ZeRO-1, 110.7 of 180 GiB per device). The
# workload is the built-in fcn, so the exported command also runs here.
GIB = 2**30
# key -> provider, accelerator, count, on demand / spot USD per hour, region, plan fields,
# central / upper GiB per device, device GiB, steady step s; run times for batch 256 / 512.
PLAN_MACHINES: dict[str, tuple[Any, ...]] = {
    "ec2:p6-b200.48xlarge": ("aws", "B200", 8, 113.93, 24.40, "us-east-1",
                             ("bf16", 2, "none", "optimizer"), 110.7, 125.2, 180.0, 1.21),
    "compute-engine:a3-highgpu-8g": ("gcp", "H100", 8, 88.25, 29.17, "us-central1",
                                     ("bf16", 2, "blocks", "gradients"), 61.3, 70.4, 80.0, 1.5),
    "azure-vm:ND96isr_H100_v5": ("azure", "H100", 8, 98.32, 39.33, "eastus",
                                 ("bf16", 4, "none", "parameters"), 52.0, 60.5, 80.0, 1.9),
    "ec2:g5.xlarge": ("aws", "A10G", 1, 1.006, 0.45, "us-east-1",
                      ("bf16", 2, "blocks", "none"), 18.2, 21.9, 24.0, 12.0),
}  # fmt: skip
PLAN_TIMES = {
    "ec2:p6-b200.48xlarge": (2700.0, 2650.0),
    "compute-engine:a3-highgpu-8g": (3300.0, 3200.0),
    "azure-vm:ND96isr_H100_v5": (3600.0, 3500.0),
    "ec2:g5.xlarge": (40000.0, 39000.0),
}


def plan_estimate(key: str, batch: int) -> dict[str, Any]:
    """What the prediction path records for a planned row: its plan (fields and words) and
    its memory per device (``DeviceMemory.to_dict``'s shape)."""
    from advisor.prediction.step.plan import TrainingPlan

    _, _, gpus, _, _, _, fields, need, high, have, _ = PLAN_MACHINES[key]
    plan = TrainingPlan(*fields)
    per = -(-batch // gpus)
    step = {"per_device_batch": per, "known": True, "unknown_reason": "", "bytes": need * GIB,
            "low": need * 0.9 * GIB, "high": high * GIB, "terms": [], "notes": []}  # fmt: skip
    memory = {"fits": True, "text": f"{need:.1f} of {have:.1f} GiB", "need_gib": need,
              "have_gib": have, "devices": gpus, "per_device_batch": per, "how": "traced",
              "device": "gpu", "note": "", "step": step}  # fmt: skip
    return {"plan": plan.words(per), "training_plan": plan.to_dict(), "memory": memory}


def plan_table() -> ReplayTable:
    from advisor.probes.result import PhaseTimes

    insts = tuple(
        InstanceType(prov, key.split(":")[0], key.split(":")[1], 12 * gpus, 120.0 * gpus, acc,
                     gpus, have, price, spot, "2026-11", "docs/method.md section 5", region)
        for key, (prov, acc, gpus, price, spot, region, _, _, _, have, _) in PLAN_MACHINES.items()
    )  # fmt: skip

    def phases(key: str, batch: int) -> PhaseTimes:
        t2 = PLAN_MACHINES[key][-1] * (batch / 256) ** 1.3  # batch 256 runs fastest
        return PhaseTimes(Interval(60.0, 50.0, 90.0), Interval(3 * t2, 2 * t2, 5 * t2),
                          Interval(t2, 0.8 * t2, 1.5 * t2), Interval(5.0, 4.0, 8.0),
                          Interval(4.0, 3.0, 6.0), source="modelled")  # fmt: skip

    entries = tuple(
        ReplayEntry(m, b, Interval(t, t * 0.95, t * 1.05),
                    predicted=Interval(t * 1.1, t * 0.8, t * 1.4), probe_s=30.0,
                    phases=phases(m, b), estimate=plan_estimate(m, b))
        for m, times in PLAN_TIMES.items()
        for b, t in zip((256, 512), times, strict=True)
    )  # fmt: skip
    return ReplayTable(insts, entries, snapshot="test-2026-11", epochs=10)


def args_of(argv: list[str]) -> dict[str, str]:
    """``--name value`` pairs after ``advisor.train`` (a value may be a quoted env reference)."""
    rest = argv[argv.index("advisor.train") + 1 :]
    assert len(rest) % 2 == 0, rest
    return {rest[i].removeprefix("--"): rest[i + 1].strip('"') for i in range(0, len(rest), 2)}
