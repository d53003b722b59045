"""`advisor suggest`: recommend machine, batch size and hyperparameters with time and cost."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from advisor.cli import console as output
from advisor.cli import params as p
from advisor.cli.export import ExportTo
from advisor.cli.saved_files import EXIT_STATUS, write_atomically, write_text
from advisor.errors import MissingExtraError
from advisor.options import OBJECTIVES, OPTIONS, SAMPLER_NAMES
from advisor.prediction.plan import DEFAULT_PRECISION, PRECISION_CHOICES
from advisor.search_spaces.workloads import ModelRef


def _option(field: str, *extra: str, **kwargs: Any) -> Callable[[Any], Any]:
    """The click option of ``SuggestOptions.field``: flag and help from ``advisor.options``."""
    doc = OPTIONS[field]
    assert doc.flag is not None, field
    flag = f"{doc.flag}/{doc.off}" if doc.off else doc.flag  # --spot/--no-spot
    return click.option(flag, *extra, field, help=doc.help, **kwargs)


@click.command("suggest")
@_option("model", type=p.ModelRef(), required=True)
@p.framework_option()
@click.option("--space", "space_file", type=click.Path(dir_okay=False), help=OPTIONS["space"].help)
@_option("budget_usd", type=p.USD)
@_option("deadline_s", type=p.Duration())
@_option("objective", type=click.Choice(OBJECTIVES))
@_option("probe_budget_usd", type=p.USD_OR_ZERO)
@_option("epochs", type=p.POSITIVE)
@_option("at_batch", type=p.POSITIVE)
@_option("epochs_at", type=p.EPOCHS_AT, multiple=True)
@_option("sampler", type=click.Choice(SAMPLER_NAMES), default="tpe", show_default=True)
@_option("seed", type=p.SEED, default=0, show_default=True)
@_option("trials", type=p.BoundedInt(1, 100_000))
@_option("timeout_s", type=p.Duration())
@_option("tune_s", type=p.Duration())
@_option("snapshot")
@p.storage_option()
@_option("study_name", type=p.StudyName())
@_option("probe_iterations", type=p.BoundedInt(3, 10_000), default=8, show_default=True)
@_option("threads", type=p.THREADS)
@_option("n_train", type=p.POSITIVE)
@_option("n_val", type=p.COUNT_OR_ZERO)
@_option("data_gb", type=p.FiniteFloat(0.0, 1e6))
@_option("include_previous_generation", is_flag=True)
@_option(
    "precision", type=click.Choice(PRECISION_CHOICES), default=DEFAULT_PRECISION, show_default=True
)
@_option("plan", metavar="FIELD=VALUE,...")
@_option("gpus", metavar="NAME[:COUNT]")
@_option("cloud")
@_option("region")
@_option("spot", default=None)
@_option("local", default=None)
@_option("value_of_time", type=p.USD, metavar="USD_PER_HOUR")
@click.option("--no-screen", "screen", flag_value=False, default=True, help=OPTIONS["screen"].help)
@_option("cloud_probes", type=p.BoundedInt(0, 100), default=0, show_default=True)
@_option("cloud_settings", type=click.Path(dir_okay=False))
@_option("emulate_cloud", is_flag=True, hidden=True)
@click.option(
    "--top",
    type=p.BoundedInt(1, 100_000),
    default=None,
    help="Ranking rows shown (default: 5; with --verbose 15).",
)
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="The full report: ranking, Pareto set, epochs per batch size, epoch sweep, notes.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option(
    "--out",
    "out_file",
    type=p.WritablePath(),
    help="Also write the JSON report to this file (after the report is printed).",
)
@click.option(
    "--plot",
    "plot_file",
    type=p.WritablePath((".png",)),
    help="Write the cost vs run time plot as PNG here, and an interactive HTML twin next to "
    "it (same name, .html; needs the plot extra), after the report is printed.",
)
@click.option(
    "--export",
    "export_to",
    type=ExportTo(),
    help="Also write the recommendation as TARGET:FILE, TARGET one of skypilot, sagemaker, "
    "vertex, azureml (see `advisor export`), after the report is printed.",
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
    top: int | None,
    verbose: bool,
    as_json: bool,
    out_file: Path | None,
    plot_file: Path | None,
    export_to: tuple[str, Path] | None,
    backend_spec: str | None,
    server: str | None,
    token: str | None,
    **fields: Any,
) -> None:
    """Recommend where and how to train MODEL: machine, batch size, hyperparameters,
    with time and cost, from an Optuna study scored by cheap probes.

    \b
    Example: advisor suggest --model fcn --budget 5
    Exit status: 0 finished; 2 bad input (one line); 130 after Ctrl-C and 143 after SIGTERM,
    with the report of the trials that finished.
    """
    from advisor.options import SuggestOptions
    from advisor.search_spaces.loader import load_space
    from advisor.storage.locks import terminate_as_exception

    model = ModelRef(fields["model"])
    space = load_space(Path(space_file), None if model.is_user else model) if space_file else None
    options = SuggestOptions(space=space, **fields)
    view = _View(top, verbose, as_json, out_file, plot_file, export_to)
    if server:  # issue #17: the same request, run by a service
        from advisor.service.suggest_client import suggest_remote

        space_text = Path(space_file).read_text() if space_file else None  # read and checked
        _show(suggest_remote(server, token, options, space_text, backend_spec, as_json), view)
        return
    if not backend_spec:  # issue #28: a stopped study answers at once, before heavy imports
        from advisor.study.answer_cache import answer_for

        kept = answer_for(options)
        if kept is not None:
            _show(kept, view)
            return
    from advisor.evaluation.replay import backend_from_spec
    from advisor.pipeline import suggest as run_pipeline

    backend = backend_from_spec(backend_spec) if backend_spec else None
    # issue #36: the first answer from the operator trace while the local probes run (not
    # with --json: one final document)
    early = None if as_json or backend is not None else _first_answer_printer(top)
    with terminate_as_exception():  # SIGTERM stops the search as Ctrl-C does (exit 143)
        if not as_json and sys.stderr.isatty():
            report = _run_with_progress(options, backend, early)
        else:
            report = run_pipeline(options, backend=backend, on_first_answer=early)
        _show(report, view)
    status = EXIT_STATUS.get(str(report.get("interrupted")))
    if status is not None:  # the partial report is printed; a script can tell it apart
        sys.exit(status)


@dataclass(frozen=True)
class _View:
    """How the report is shown and where else it goes (the options that are not the study's)."""

    top: int | None
    verbose: bool
    as_json: bool
    out_file: Path | None
    plot_file: Path | None
    export_to: tuple[str, Path] | None = None  # issue #37: --export TARGET:FILE


def _show(report: dict[str, Any], view: _View) -> None:
    """Print ``report`` (the local run's and ``--server``'s alike), then write the files asked
    for: after the answer is on the screen, each atomically (``advisor.cli.saved_files``)."""
    from advisor.report.render import render

    html = view.plot_file.with_suffix(".html") if view.plot_file else None
    if view.plot_file:
        report["plot"], report["plot_html"] = str(view.plot_file), str(html)
    if view.as_json:
        click.echo(json.dumps(report, indent=1, default=str))
    else:
        render(report, output.console(), top=view.top, verbose=view.verbose)
    if view.out_file:
        text = json.dumps(report, indent=1, default=str) + "\n"
        write_text(view.out_file, text, "JSON report")
        _written(view, f"report written to {view.out_file}")
    if view.plot_file and html:
        from advisor.report.plot import plot, plot_html

        write_atomically(view.plot_file, lambda tmp: plot(report, tmp), "plot")
        try:
            write_atomically(html, lambda tmp: plot_html(report, tmp), "interactive plot")
            _written(view, f"plot written to {view.plot_file} and {html}")
        except MissingExtraError as exc:
            click.echo(f"plot written to {view.plot_file}; no HTML plot: {exc}", err=True)
    if view.export_to:  # issue #37: what the report recommends, as a task or a job
        from advisor.export.api import export

        done = export(view.export_to[0], report=report, out=view.export_to[1])
        _written(view, done.summary())


def _written(view: _View, line: str) -> None:
    """Say where a file went: on stdout after the report, on stderr after --json."""
    click.echo(line, err=view.as_json)


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


def _first_answer_printer(top: int | None) -> Callable[[dict[str, Any]], None]:
    """Print the first answer's block (``advisor.report.first_answer``) on stdout."""

    def show(report: dict[str, Any]) -> None:
        from advisor.report.first_answer import print_block

        print_block(report, output.console(), min(top or 3, 3))

    return show


def _run_with_progress(
    options: Any, backend: Any, early: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
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

        return run_pipeline(options, backend=backend, progress=hook, on_first_answer=early)
