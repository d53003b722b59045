"""`advisor export`: the report's recommendation (or a ranked row) as a SkyPilot task or a
managed service's training job (issue #37)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from advisor.cli import params as p

TARGETS = ("skypilot", "sagemaker", "vertex", "azureml")  # advisor.export.row.TARGETS


@click.command("export")
@click.option("--study", required=True, type=p.StudyName(), help="The study `advisor suggest` ran.")
@click.option("--to", "target", required=True, type=click.Choice(TARGETS), help="What to write.")
@click.option(
    "--row",
    type=p.BoundedInt(1, 100_000),
    default=None,
    help="Row N of the report's ranking (the # column; default: the recommendation).",
)
@click.option(
    "--out",
    "out_file",
    type=p.WritablePath(),
    default=None,
    help="Write it here (default: print it).",
)
@click.option("--submit", is_flag=True, help="Also submit the job (a managed service's target).")
@click.option("--storage", help="Optuna storage URL (default: SQLite in ADVISOR_HOME).")
@click.option(
    "--disk-gb",
    type=p.BoundedInt(8, 65_536),
    default=100,
    show_default=True,
    help="SkyPilot disk size, GB.",
)
def export(
    study: str,
    target: str,
    row: int | None,
    out_file: Path | None,
    submit: bool,
    storage: str | None,
    disk_gb: int,
) -> None:
    """Write what the report of STUDY printed -- machine, region, spot, batch size, epochs,
    hyperparameters, the training plan (precision, accumulation, checkpointing, sharding) and
    the predicted peak memory and step time -- as a SkyPilot task or a SageMaker / Vertex AI /
    Azure ML training job that runs `python -m advisor.train` with them. A spot row resumes
    from checkpoints (a SkyPilot managed job with a bucket mounted, SageMaker
    CheckpointConfig, Vertex AI's checkpoint folder, an Azure ML checkpoint output).

    \b
    Example: advisor export --study fcn-1a2b --to skypilot --out task.yaml
    """
    from advisor.export.api import export as run_export

    done = run_export(
        target, study=study, row=row, out=out_file, submit=submit, storage=storage,
        disk_gb=disk_gb,
    )  # fmt: skip
    show(done, printed=out_file is None)


def show(done: Any, printed: bool) -> None:
    """Print the file (when not written) and what was exported, on stderr when it is printed."""
    if printed:
        click.echo(done.text, nl=False)
    click.echo(done.summary(), err=printed)


class ExportTo(click.ParamType):
    """``suggest --export TARGET:FILE`` -> (target, path), the file's folder checked before the
    search runs (``WritablePath``)."""

    name = "TARGET:FILE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        target, colon, file = str(value).partition(":")
        if not colon or target not in TARGETS or not file:
            self.fail(
                f"{value!r}: give TARGET:FILE, TARGET one of {', '.join(TARGETS)} "
                "(e.g. skypilot:task.yaml).",
                param,
                ctx,
            )
        return target, p.WritablePath().convert(file, param, ctx)
