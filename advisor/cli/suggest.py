"""`advisor suggest`: recommend machine, batch size and hyperparameters with time and cost."""

from __future__ import annotations

import json
import sys
import time
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
from advisor.options import MAX_NODES, OBJECTIVES, OPTIONS, SAMPLER_NAMES
from advisor.prediction.step.plan import DEFAULT_PRECISION, PRECISION_CHOICES
from advisor.search_spaces.hf import METHODS
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
@_option("method", type=click.Choice(METHODS))
@_option("seq_len", type=p.POSITIVE)
@_option("tokens", type=p.POSITIVE)
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
@_option("max_nodes", type=p.BoundedInt(1, MAX_NODES), default=1, show_default=True)
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
    from advisor.search_spaces.hf.flags import apply_flags
    from advisor.search_spaces.loader import load_space
    from advisor.storage.locks import terminate_as_exception

    fields["model"], fields["n_train"], fields["epochs"] = apply_flags(  # issue #48
        fields["model"], fields["n_train"],
        *(fields.pop(k) for k in ("method", "seq_len", "tokens")), fields["epochs"],
    )  # fmt: skip
    model = ModelRef(fields["model"])
    space = load_space(Path(space_file), None if model.is_user else model) if space_file else None
    options = SuggestOptions(space=space, **fields)
    view = _View(top, verbose, as_json, out_file, plot_file, export_to)
    if server:  # issue #17: the same request, run by a service
        from advisor.cli.progress import reporting
        from advisor.service.suggest_client import suggest_remote

        space_text = Path(space_file).read_text() if space_file else None  # read and checked
        first = None if as_json else _first_answer_printer(top)  # issue #46: the job's
        with reporting() as progress:  # issue #50: the job's progress, as the service says it
            report = suggest_remote(server, token, options, space_text, backend_spec, as_json,
                                    progress=progress, on_first_answer=first)  # fmt: skip
        _show(report, view)
        return
    from advisor.cli.progress import process_start_up, reporting

    backend = None
    if backend_spec:
        from advisor.evaluation.replay import backend_from_spec

        backend = backend_from_spec(backend_spec)
    # issue #36: the first answer from the operator trace while the local probes run (not
    # with --json: one final document)
    early = None if as_json or backend is not None else _first_answer_printer(top)
    with terminate_as_exception():  # SIGTERM stops the search as Ctrl-C does (exit 143)
        # issue #50: progress on stderr from the start, a live line on a terminal, plain
        # lines off one (with --json too: stdout keeps the one document); rates on the back
        # end's clock
        clock = backend.clock if backend is not None else time.monotonic
        began = clock()  # the command's whole time counts the process's start-up before it
        before = process_start_up() if backend is None else 0.0
        with reporting(clock) as progress:
            progress("start:preparing: the model, its dataset sizes, the space, the catalog", 0, 1)
            report = _run(options, backend, progress, early)
        _whole_command(report, before + clock() - began)
        _show(report, view)
    status = EXIT_STATUS.get(str(report.get("interrupted")))
    if status is not None:  # the partial report is printed; a script can tell it apart
        sys.exit(status)


def _whole_command(report: dict[str, Any], wall_s: float) -> None:
    """Issue #50: the footer's time is the command's, its start-up (reading the model, the
    kept answer's lookup, imports) counted beside what the report's ``timings`` name."""
    timings = report.setdefault("timings", {})
    timings["start-up"] = round(max(0.0, wall_s - float(report.get("wall_s") or 0.0)), 3)
    report["wall_s"] = round(max(wall_s, float(report.get("wall_s") or 0.0)), 3)


def _run(
    options: Any,
    backend: Any,
    progress: Any,
    early: Callable[[dict[str, Any]], None] | None,
) -> dict[str, Any]:
    """The report: a stopped study's kept answer at once (issue #28, before heavy imports),
    else the pipeline's."""
    if backend is None:
        from advisor.study.answer_cache import answer_for

        kept = answer_for(options)
        if kept is not None:
            return kept
    from advisor.pipeline import suggest as run_pipeline

    return run_pipeline(options, backend=backend, progress=progress, on_first_answer=early)


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
    """What a progress line says (``advisor.progress.label``)."""
    from advisor.progress import label

    return label(phase, total)


def _first_answer_printer(top: int | None) -> Callable[[dict[str, Any]], None]:
    """Print the first answer's block (``advisor.report.first_answer``) on stdout."""

    def show(report: dict[str, Any]) -> None:
        from advisor.report.first_answer import print_block

        print_block(report, output.console(), min(top or 3, 3))

    return show
