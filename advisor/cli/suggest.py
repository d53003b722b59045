"""`advisor suggest`: recommend machine, batch size and hyperparameters with time and cost."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from advisor.cli import output
from advisor.cli import params as p
from advisor.errors import MissingExtraError
from advisor.options import OBJECTIVES, OPTIONS
from advisor.search_spaces.workloads import ModelRef
from advisor.study.samplers import SAMPLERS


def _option(field: str, *extra: str, **kwargs: Any) -> Callable[[Any], Any]:
    """The click option of ``SuggestOptions.field``: flag and help from ``advisor.options``."""
    doc = OPTIONS[field]
    assert doc.flag is not None, field
    return click.option(doc.flag, *extra, field, help=doc.help, **kwargs)


@click.command("suggest")
@_option("model", type=p.ModelRef(), required=True)
@_option("framework", type=click.Choice(["torch", "keras"]), default="torch", show_default=True)
@click.option("--space", "space_file", type=click.Path(dir_okay=False), help=OPTIONS["space"].help)
@_option("budget_usd", type=p.USD)
@_option("deadline_s", type=p.Duration())
@_option("objective", type=click.Choice(OBJECTIVES))
@_option("probe_budget_usd", type=p.USD_OR_ZERO)
@_option("epochs", type=p.POSITIVE)
@_option("at_batch", type=p.POSITIVE)
@_option("epochs_at", type=p.EPOCHS_AT, multiple=True)
@_option("sampler", type=click.Choice(SAMPLERS), default="tpe", show_default=True)
@_option("seed", type=p.SEED, default=0, show_default=True)
@_option("trials", type=p.BoundedInt(1, 100_000))
@_option("timeout_s", type=p.Duration())
@_option("tune_s", type=p.Duration())
@_option("snapshot")
@_option("storage")
@_option("study_name", type=p.StudyName())
@_option("probe_iterations", type=p.BoundedInt(3, 10_000), default=8, show_default=True)
@_option("threads", type=p.THREADS)
@_option("n_train", type=p.POSITIVE)
@_option("n_val", type=p.COUNT_OR_ZERO)
@_option("data_gb", type=p.FiniteFloat(0.0, 1e6))
@_option("include_previous_generation", is_flag=True)
@click.option("--no-screen", "screen", flag_value=False, default=True, help=OPTIONS["screen"].help)
@_option("cloud_probes", type=p.BoundedInt(0, 100), default=0, show_default=True)
@_option("cloud_settings", type=click.Path(dir_okay=False))
@_option("emulate_cloud", is_flag=True, hidden=True)
@click.option(
    "--top",
    type=p.BoundedInt(1, 100_000),
    default=15,
    show_default=True,
    help="Ranking rows shown.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option(
    "--plot",
    "plot_file",
    type=p.WritablePath((".png",)),
    help="Write the cost vs run time plot as PNG here, and an interactive HTML twin next to "
    "it (same name, .html; needs the plot extra).",
)
@click.option(
    "--backend",
    "backend_spec",
    hidden=True,
    help="Scoring back end for tests and benchmarks: replay:TABLE.json (default: local probes).",
)
@click.option(
    "--server",
    help="Run on an advisor service (`advisor serve`) at this URL; token from ADVISOR_TOKEN "
    "or --token.",
)
@click.option("--token", envvar="ADVISOR_TOKEN", help="Service token (default: $ADVISOR_TOKEN).")
def suggest(
    space_file: str | None,
    top: int,
    as_json: bool,
    plot_file: Path | None,
    backend_spec: str | None,
    server: str | None,
    token: str | None,
    **fields: Any,
) -> None:
    """Recommend where and how to train MODEL: machine, batch size, hyperparameters,
    with time and cost, from an Optuna study scored by cheap probes.

    Example: advisor suggest --model fcn --budget 5
    """
    from advisor.evaluation.replay import backend_from_spec
    from advisor.options import SuggestOptions
    from advisor.pipeline import suggest as run_pipeline
    from advisor.search_spaces.loader import load_space

    model = ModelRef(fields["model"])
    space = load_space(Path(space_file), None if model.is_user else model) if space_file else None
    options = SuggestOptions(space=space, **fields)
    if server:  # issue #17: the same request, run by a service
        from advisor.service.remote import suggest_remote

        space_text = Path(space_file).read_text() if space_file else None  # read and checked
        report = suggest_remote(server, token, options, space_text, backend_spec, as_json)
        _show(report, as_json, plot_file, top)
        return
    backend = backend_from_spec(backend_spec) if backend_spec else None
    show_progress = not as_json and sys.stderr.isatty()
    if show_progress:
        report = _run_with_progress(options, backend)
    else:
        report = run_pipeline(options, backend=backend)
    _show(report, as_json, plot_file, top)


def _show(report: dict[str, Any], as_json: bool, plot_file: Path | None, top: int) -> None:
    """Print ``report`` (and write its plots): the local run's and ``--server``'s alike."""
    from advisor.report.plot import plot, plot_html
    from advisor.report.render import render

    if plot_file:
        plot(report, str(plot_file))
        report["plot"] = str(plot_file)
        html = str(Path(plot_file).with_suffix(".html"))
        try:
            plot_html(report, html)
            report["plot_html"] = html
        except MissingExtraError as exc:
            report["plot_html"] = None
            click.echo(f"no HTML plot: {exc}", err=True)
    if as_json:
        click.echo(json.dumps(report, indent=1, default=str))
        return

    render(report, output.console(), top=top)
    if plot_file:
        click.echo(
            f"plot written to {plot_file}"
            + (f" and {report['plot_html']}" if report.get("plot_html") else "")
        )


def progress_label(phase: str, total: int) -> str:
    """What a progress line says: the study's phases by name, anything else as sent; a phase
    "KIND:TEXT" (e.g. "probe:probing batch 512 on this machine") shows TEXT on the KIND line."""
    if phase == "screen":
        return f"screening {total} machine x batch pairs (a local probe per new batch size)"
    if phase == "trials":
        return f"trials (up to {total}; a new machine or batch size may probe)"
    if phase == "cloud":
        return f"cloud probes (up to {total} machines, each a managed job)"
    return phase.split(":", 1)[1] if ":" in phase else phase


def _run_with_progress(options: Any, backend: Any) -> dict[str, Any]:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from advisor.pipeline import suggest as run_pipeline

    tasks: dict[str, Any] = {}
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:

        def hook(phase: str, done: int, total: int) -> None:
            # "probe:probing batch 512 on this machine" updates one "probe" line in place.
            label, key = escape(progress_label(phase, total)), phase.split(":", 1)[0]
            if key not in tasks:
                tasks[key] = bar.add_task(label, total=total)
            bar.update(tasks[key], completed=done, total=total, description=label)

        return run_pipeline(options, backend=backend, progress=hook)
