"""The row an export writes: the report's recommendation or row N of its ranking, and the
training command that runs it (``python -m advisor.train``, the managed tuning jobs' entry)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor.errors import AdvisorError
from advisor.providers.catalog import MachineKey
from advisor.providers.tuning import ENTRY_POINT

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
    hyperparameters, and the predicted run time and cost the report gave it."""

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

    @property
    def label(self) -> str:
        return "the recommendation" if self.rank == 0 else f"row {self.rank}"

    @property
    def device(self) -> str:
        return "cuda" if self.gpus else "cpu"

    def train_args(self) -> list[str]:
        """``advisor.train``'s arguments for this row: the workload, batch size, epochs, the
        device, and each hyperparameter the report gave (sorted by name)."""
        args = ["--model", self.workload, "--batch-size", str(self.batch_size)]
        if self.epochs is not None:
            args += ["--epochs", str(self.epochs)]
        args += ["--device", self.device]
        for name, value in sorted(self.hyperparameters.items()):
            args += [f"--{name.replace('_', '-')}", str(value)]
        return args

    def command(self) -> list[str]:
        """The whole command: ``python -m advisor.train`` and ``train_args``."""
        return [*ENTRY_POINT, *self.train_args()]

    def plan(self) -> str:
        """How the run is laid out, as ``advisor.train`` runs it (``advisor.train.device``)."""
        if self.gpus > 1:
            per = self.batch_size / self.gpus
            return (
                f"1 machine, {self.gpus} x {self.accelerator}: one DistributedDataParallel "
                f"process per GPU, global batch {self.batch_size} = {per:g} per GPU"
            )
        if self.gpus == 1:
            return f"1 machine, 1 x {self.accelerator}, batch {self.batch_size}"
        return f"1 machine, CPU only, batch {self.batch_size}"


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
