"""The row an export writes: the report's recommendation or row N of its ranking, and the
training command that runs it (``python -m advisor.train``, the managed tuning jobs' entry),
built by the one function ``advisor submit`` builds its trials' command with
(``advisor.providers.train_command``): workload, batch, epochs, hyperparameters, the whole
training plan the row was predicted under, the device, and what the report predicted for it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from advisor.errors import AdvisorError
from advisor.providers.catalog import MachineKey
from advisor.providers.train_command import ENTRY_POINT, train_args, train_values

TARGETS = ("skypilot", "sagemaker", "vertex", "azureml")
# The catalog providers each target runs (SkyPilot: every cloud's virtual machines).
TARGET_PROVIDERS: dict[str, tuple[str, ...]] = {
    "skypilot": ("aws", "gcp", "azure"),
    "sagemaker": ("aws",),
    "vertex": ("gcp",),
    "azureml": ("azure",),
}


@dataclass(frozen=True)
class ExportRow:
    """What the report printed for one row: machine (catalog key, ``:spot`` included), its
    provider, service, instance type, accelerator and count, region, batch size, epochs,
    hyperparameters, the predicted run time and cost the report gave it, its training plan
    (``TrainingPlan.to_dict()`` fields and the report's words) and what its run should measure
    (``advisor.report.expected``: peak memory per device, steady step time)."""

    rank: int  # 1-based; 0: the recommendation
    machine: str
    provider: str
    service: str
    instance_type: str
    accelerator: str | None
    gpus: int
    region: str | None
    spot: bool
    batch_size: int
    epochs: int | None
    workload: str
    framework: str
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    runtime_s: float | None = None
    runtime_high_s: float | None = None
    cost_usd: float | None = None
    price_per_hour: float | None = None
    training_plan: dict[str, Any] | None = None
    plan_words: str | None = None
    expected: dict[str, Any] | None = None
    nodes: int = 1  # machines of the row's type joined by the network (issue #49)

    @property
    def label(self) -> str:
        return "the recommendation" if self.rank == 0 else f"row {self.rank}"

    @property
    def device(self) -> str:
        return "cuda" if self.gpus else "cpu"

    @property
    def per_device_batch(self) -> int:
        return math.ceil(self.batch_size / max(self.gpus * self.nodes, 1))

    def plan(self) -> Any:
        """The row's ``TrainingPlan`` (None: the plain float32 step, or a CPU row)."""
        if not isinstance(self.training_plan, dict):
            return None
        from advisor.prediction.step.plan import TrainingPlan

        return TrainingPlan.from_dict(self.training_plan)

    def plan_arg(self) -> str | None:
        """The plan as ``--plan`` text (``TrainingPlan.arg()``), as ``advisor submit`` passes it."""
        plan = self.plan()
        return None if plan is None else str(plan.arg())

    def plan_text(self) -> str:
        """The plan in words, as the report printed it."""
        if self.plan_words:
            return self.plan_words
        plan = self.plan()
        if plan is not None:
            return str(plan.words(self.per_device_batch))
        return "float32, the plain step (no plan)" if self.gpus else "float32 on the CPU"

    def expect(self) -> dict[str, float]:
        """``advisor.train``'s ``--expect-*`` values: the report's predictions for this row."""
        from advisor.report.expected import expect_options

        return expect_options(self.expected)

    def train_values(self, checkpoint_dir: str | None = None) -> dict[str, str]:
        """``advisor.train``'s values for this row (``providers.train_command.train_values``,
        the one place export and submit build them): workload, batch size, epochs, plan,
        hyperparameters, device, the predictions, the checkpoint folder when given."""
        return train_values(
            model=self.workload, batch_size=self.batch_size, epochs=self.epochs,
            plan=self.plan_arg(), hyperparameters=self.hyperparameters, device=self.device,
            checkpoint_dir=checkpoint_dir, **self.expect(),
        )  # fmt: skip

    def train_args(self, checkpoint_dir: str | None = None) -> list[str]:
        """``advisor.train``'s command-line arguments for this row."""
        return train_args(self.train_values(checkpoint_dir))

    def command(self, checkpoint_dir: str | None = None) -> list[str]:
        """The whole command: ``python -m advisor.train`` and ``train_args``."""
        return [*ENTRY_POINT, *self.train_args(checkpoint_dir)]

    def layout(self) -> str:
        """How the run is laid out, as ``advisor.train`` runs it (``advisor.train.device``)."""
        if self.nodes > 1:
            each = f"{self.gpus} x {self.accelerator}" if self.gpus else "CPU only"
            per = self.batch_size / max(self.gpus * self.nodes, self.nodes)
            return (
                f"{self.nodes} machines of {each} under torchrun: one process per "
                f"{'GPU' if self.gpus else 'machine'}, global batch {self.batch_size} = {per:g} "
                "per process"
            )
        if self.gpus > 1:
            per = self.batch_size / self.gpus
            return (
                f"1 machine, {self.gpus} x {self.accelerator}: one DistributedDataParallel "
                f"process per GPU, global batch {self.batch_size} = {per:g} per GPU"
            )
        if self.gpus == 1:
            return f"1 machine, 1 x {self.accelerator}, batch {self.batch_size}"
        return f"1 machine, CPU only, batch {self.batch_size}"

    def predicted(self) -> str:
        """What the report predicted the run measures, in words ("" when it predicted none)."""
        found = self.expected or {}
        parts = []
        if found.get("peak_gib"):
            high = found.get("peak_high_gib")
            upper = f" (up to {high:.4g})" if high else ""
            have = f" of {found['have_gib']:.4g}" if found.get("have_gib") else ""
            parts.append(f"peak memory {found['peak_gib']:.4g}{upper}{have} GiB per device")
        if found.get("step_s"):
            parts.append(f"steady step {found['step_s']:.4g} s")
        return ", ".join(parts)


def pick_row(report: dict[str, Any], row: int | None) -> ExportRow:
    """The recommendation (``row`` None) or row ``row`` (1-based) of the report's ranking;
    one-line errors for a report with no recommendation or a row out of range."""
    ranking = report.get("ranking") or []
    study = report.get("study") or "this study"
    if row is None:
        chosen = report.get("recommended")
        if not chosen:
            raise AdvisorError(
                f"Study '{study}' has no recommendation to export (no candidate fits its limits).",
                "re-run `advisor suggest` with a larger --budget or --deadline, or pick a "
                "ranked row with --row N.",
            )
        return _row(report, chosen, 0)
    if not 1 <= row <= len(ranking):
        raise AdvisorError(
            f"--row {row} is out of range: study '{study}' ranks {len(ranking)} rows.",
            f"give --row 1 to {len(ranking)} (the # column of the report's ranking)."
            if ranking
            else "re-run `advisor suggest` first.",
        )
    return _row(report, ranking[row - 1], row)


def _row(report: dict[str, Any], r: dict[str, Any], rank: int) -> ExportRow:
    key = MachineKey(str(r["machine"]))
    runtime = r.get("runtime_s") or {}
    cost = r.get("cost_usd") or {}
    return ExportRow(
        rank=rank,
        machine=str(r["machine"]),
        provider=str(r.get("provider") or ""),
        service=str(r.get("service") or key.service),
        instance_type=str(r.get("instance_type") or key.instance_type),
        accelerator=r.get("accelerator"),
        gpus=int(r.get("gpus") or 0),
        region=r.get("region"),
        spot=bool(r.get("spot", key.spot)),
        batch_size=int(r["batch_size"]),
        epochs=None if r.get("epochs") is None else int(r["epochs"]),
        workload=str(report["workload"]),
        framework=str(report.get("framework") or "torch"),
        hyperparameters=dict(r.get("hyperparameters") or {}),
        runtime_s=runtime.get("value"),
        runtime_high_s=runtime.get("high"),
        cost_usd=cost.get("value"),
        price_per_hour=r.get("price_per_hour"),
        training_plan=r.get("training_plan") if isinstance(r.get("training_plan"), dict) else None,
        plan_words=r.get("plan") or None,
        expected=r.get("expected") if isinstance(r.get("expected"), dict) else None,
        nodes=max(1, int(r.get("nodes") or 1)),
    )


def check_target(row: ExportRow, target: str, ranking: list[dict[str, Any]]) -> None:
    """Refuse a target that does not run the row's machine (a GCP machine to SageMaker), a
    machine no cloud sells (this one, an owned one), and a Keras run (``advisor.train``
    trains PyTorch workloads); the fix names the rows the target does run."""
    if target not in TARGETS:
        raise AdvisorError(
            f"Unknown export target '{target}'.", f"use one of {', '.join(TARGETS)}."
        )
    if row.framework != "torch":
        raise AdvisorError(
            f"{row.label} trains with {row.framework}; advisor.train, which the exported job "
            "runs, trains PyTorch workloads.",
            "run `advisor suggest --framework torch` and export that study.",
        )
    allowed = TARGET_PROVIDERS[target]
    if row.provider in allowed:
        return
    fits = [
        str(i)
        for i, r in enumerate(ranking, 1)
        if r.get("provider") in allowed and r.get("feasible", True)
    ][:5]
    what = "is no cloud machine" if row.provider in ("local", "owned", "") else f"is {row.provider}"
    others = f"--row {' or '.join(fits)} ({', '.join(allowed)})" if fits else "another --row"
    raise AdvisorError(
        f"{row.label} ({row.machine}) {what}; {target} runs {'/'.join(allowed)} machines only.",
        f"export it --to {_target_for(row.provider)}, or pick {others}."
        if _target_for(row.provider)
        else f"pick {others}.",
    )


def _target_for(provider: str) -> str | None:
    for target in ("sagemaker", "vertex", "azureml"):
        if provider in TARGET_PROVIDERS[target]:
            return target
    return None
