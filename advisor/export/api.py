"""``advisor.export``: write a report's row as a SkyPilot task or a managed service's training
job (``advisor export``, ``advisor suggest --export``), and optionally submit the job."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.errors import AdvisorError
from advisor.export.names import check_name
from advisor.export.row import ExportRow, check_target, pick_row
from advisor.export.services import BUILDERS, JobFile, job_name
from advisor.export.skypilot import DEFAULT_DISK_GB, launch_hint, task_yaml


@dataclass(frozen=True)
class Exported:
    """What an export wrote: the row, the target, the file (None: not written), its text, how
    to submit it, what is still to fill in, and the submitted job's id (``--submit``)."""

    row: ExportRow
    target: str
    path: Path | None
    text: str
    submit_hint: str
    fill_in: tuple[str, ...] = ()
    job_id: str | None = None
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        r = self.row
        hps = ", ".join(f"{k}={v}" for k, v in sorted(r.hyperparameters.items())) or "defaults"
        where = f"written to {self.path}" if self.path else "not written"
        lines = [
            f"{r.label}: {r.machine} ({r.region or 'cheapest region'}, "
            f"{'spot' if r.spot else 'on demand'}), batch {r.batch_size}, "
            f"{r.epochs if r.epochs is not None else 'default'} epochs, hyperparameters "
            f"{hps}; {r.layout()}",
            f"  plan: {r.plan_text()}" + (f" (--plan {r.plan_arg()})" if r.plan_arg() else ""),
        ]
        if r.predicted():
            lines.append(f"  predicted: {r.predicted()} (the job prints what it measures beside)")
        lines.append(f"{self.target} {'task' if self.target == 'skypilot' else 'job'} {where}")
        lines += [f"note: {note}" for note in self.notes]
        if self.fill_in:
            lines.append(
                f"fill in before submitting: {', '.join(self.fill_in)} (placeholders; or set them "
                "in $ADVISOR_HOME/cloud.yaml and export again)"
            )
        if self.job_id:
            lines.append(f"submitted: {self.job_id}")
        elif self.path:
            lines.append(f"submit: {self.submit_hint.replace('FILE', str(self.path))}")
        return "\n".join(lines)


def report_of_study(study: str, storage: str | None = None) -> dict[str, Any]:
    """The rows ``advisor suggest`` kept in study ``study``: its kept answer (the whole report)
    when it has one, else the ranking saved with its recommendation."""
    from advisor.study.answer_cache import ANSWER
    from advisor.tuning.jobs import load_study
    from advisor.tuning.pick import RECOMMENDATION

    s = load_study(study, storage)
    kept = s.user_attrs.get(ANSWER)
    if isinstance(kept, dict) and isinstance(kept.get("report"), dict):
        return dict(kept["report"], study=study)
    saved = (s.user_attrs.get(RECOMMENDATION) or {}).get("export")
    if not saved:
        raise AdvisorError(
            f"Study '{study}' holds no report to export (no recommendation was saved with it).",
            "run `advisor suggest` for it (the same options resume it), then export again.",
        )
    return {**saved, "study": study}


def export(
    to: str,
    *,
    study: str | None = None,
    report: dict[str, Any] | None = None,
    row: int | None = None,
    out: str | Path | None = None,
    submit: bool = False,
    storage: str | None = None,
    disk_gb: int = DEFAULT_DISK_GB,
    settings: Any = None,
    name: str | None = None,
) -> Exported:
    """Export the recommendation (``row`` None) or row ``row`` of the report of ``study`` (or
    of ``report``, a report ``advisor.suggest`` returned) as a ``to`` file (skypilot,
    sagemaker, vertex, azureml) at ``out``; ``submit`` also sends a service's job. Every check
    runs before anything is written, and the file is written whole or not at all."""
    from advisor.remote.settings import CloudSettings

    if (study is None) == (report is None):
        raise AdvisorError("export needs a study or a report, not both.", "pass --study NAME.")
    if report is None:
        assert study is not None
        report = report_of_study(study, storage)
    chosen = pick_row(report, row)
    check_target(chosen, to, list(report.get("ranking") or []))
    if submit and to == "skypilot":
        raise AdvisorError(
            "--submit sends a managed service's job; SkyPilot launches its own tasks.",
            "run `sky launch FILE` on the written task.",
        )
    cloud = settings if settings is not None else CloudSettings.load()
    job = check_name(to, name) if name is not None else job_name(chosen)
    built: JobFile
    if to == "skypilot":
        built = JobFile(task_yaml(chosen, disk_gb, job), ".yaml", launch_hint(chosen))
    else:
        built = BUILDERS[to](chosen, cloud, job)
    path = Path(out) if out is not None else None
    if path is not None:
        write_whole(path, built.text)
    job_id = None
    if submit:
        from advisor.export.services import submit as send

        job_id = send(to, chosen, cloud, job)
    return Exported(chosen, to, path, built.text, built.submit_hint, built.fill_in, job_id,
                    built.notes)  # fmt: skip


def write_whole(path: Path, text: str) -> None:
    """``text`` into ``path`` through a temporary file renamed over it: whole or not at all
    (as ``advisor.cli.saved_files`` writes the report); a failure is one line."""
    folder = path.parent if str(path.parent) else Path(".")
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise AdvisorError(
            f"Could not write the export to {path}: {exc.strerror or type(exc).__name__}.",
            "pick a writable folder with --out (nothing was written).",
        ) from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
