"""`advisor suggest`: recommend machine, batch size and hyperparameters with time and cost."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from advisor.cli import output
from advisor.cli import params as p
from advisor.errors import AdvisorError, MissingExtraError


def parse_duration(text: str) -> float:
    """'2h', '90m', '3600s', '3600' -> seconds (finite, > 0, at most a year)."""
    try:
        seconds: float = p.Duration().convert(text, None, None)
    except click.BadParameter as exc:
        raise AdvisorError(
            f"Cannot read the duration '{text}'.", "write it like 2h, 90m or 3600s."
        ) from exc
    return seconds


@click.command("suggest")
@click.option(
    "--model",
    type=p.ModelRef(),
    required=True,
    help="Built-in workload (see `advisor workloads`) or your own module:function.",
)
@click.option(
    "--framework",
    type=click.Choice(["torch", "keras"]),
    default="torch",
    show_default=True,
    help="Framework the probes train with.",
)
@click.option(
    "--space",
    "space_file",
    type=click.Path(dir_okay=False),
    help="Joint search space YAML (machines, batch sizes, hyperparameters); default: the "
    "workload's own.",
)
@click.option(
    "--budget",
    type=p.USD,
    help="Most the training run may cost, USD. Dearer candidates are infeasible; the "
    "default objective becomes the fastest run within the budget.",
)
@click.option(
    "--deadline",
    type=p.Duration(),
    help="Longest the training run may take (2h, 90m, 3600s). Slower candidates are "
    "infeasible; the default objective becomes the cheapest run within the deadline.",
)
@click.option(
    "--objective",
    type=click.Choice(["time", "cost", "pareto"]),
    help="Override the objective; pareto reports the time-cost front.",
)
@click.option(
    "--probe-budget",
    type=p.USD_OR_ZERO,
    help="Most the search may spend on probes, USD, priced at each candidate machine's rate "
    "(default: 10 % of --budget, else 1).",
)
@click.option(
    "--epochs",
    type=p.POSITIVE,
    help="Epochs of the run, the same at every batch size (default: per batch size, from the "
    "gradient-noise-scale model fitted to the workload's published epochs to stabilise).",
)
@click.option(
    "--at-batch",
    type=p.POSITIVE,
    help="With --epochs: the batch size those epochs were seen at; the epochs at other batch "
    "sizes are then predicted from the probe's gradient noise scale.",
)
@click.option(
    "--epochs-at",
    "epochs_at",
    type=p.EPOCHS_AT,
    multiple=True,
    help="Epochs to target seen at a batch size, as B=N (e.g. --epochs-at 256=13); repeat it. "
    "One known point is scaled to other batch sizes by the probe's gradient noise scale; with "
    "two or more the noise scale is fitted to them and every batch size's epochs come from the "
    "fit.",
)
@click.option(
    "--sampler",
    type=click.Choice(["tpe", "gp", "random", "nsga2", "skopt"]),
    default="tpe",
    show_default=True,
    help="Optuna sampler for the hyperparameters (and machines with --no-screen).",
)
@click.option("--seed", type=p.SEED, default=0, show_default=True, help="Sampler seed.")
@click.option(
    "--trials",
    type=p.BoundedInt(1, 100_000),
    help="Trials to add now (default: until the search stops on its own, at most 60; a re-run "
    "of a study that has stopped adds none).",
)
@click.option(
    "--timeout", "timeout_", type=p.Duration(), help="Stop the search after this long (e.g. 10m)."
)
@click.option("--snapshot", help="Catalog snapshot (default: newest).")
@click.option("--storage", help="Optuna storage URL (default: SQLite in ADVISOR_HOME).")
@click.option(
    "--study-name",
    type=p.StudyName(),
    help="Study name (default: from workload, space and limits).",
)
@click.option(
    "--probe-iterations",
    type=p.BoundedInt(3, 10_000),
    default=8,
    show_default=True,
    help="Training iterations each local probe times (fewer, but at least 5, once 4 s have "
    "passed).",
)
@click.option("--threads", type=p.THREADS, help="Threads for local probes (default: all cores).")
@click.option("--n-train", type=p.POSITIVE, help="Training samples (user models).")
@click.option("--n-val", type=p.COUNT_OR_ZERO, help="Validation samples (user models).")
@click.option(
    "--data-gb",
    type=p.FiniteFloat(0.0, 1e6),
    help="GB of data a cloud job downloads before training (default: a built-in workload's "
    "size; a user model without it leaves the download out).",
)
@click.option("--no-screen", is_flag=True, help="Let the sampler alone choose machines.")
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
    "--cloud-probes",
    type=p.BoundedInt(0, 100),
    default=0,
    show_default=True,
    help="After the screen, probe the N most promising distinct cloud machines for real "
    "(different accelerator types first) and re-rank with the measurements. Each probe starts "
    "a short managed training job (SageMaker, Vertex AI, Azure ML) that costs money, charged "
    "within --probe-budget; stops early when the measured leader cannot be overtaken.",
)
@click.option(
    "--cloud-config",
    type=click.Path(dir_okay=False),
    help="Cloud settings for --cloud-probes: image, role, project, workspace... (default: "
    "$ADVISOR_HOME/cloud.yaml).",
)
@click.option(
    "--emulate-cloud-probes",
    is_flag=True,
    hidden=True,
    help="Run every cloud probe job here through the local emulation (tests, CI).",
)
@click.option(
    "--server",
    help="Run on an advisor service (`advisor serve`) at this URL; token from ADVISOR_TOKEN "
    "or --token.",
)
@click.option("--token", envvar="ADVISOR_TOKEN", help="Service token (default: $ADVISOR_TOKEN).")
def suggest(
    model: str,
    framework: str,
    space_file: str | None,
    budget: float | None,
    deadline: float | None,
    objective: str | None,
    probe_budget: float | None,
    epochs: int | None,
    at_batch: int | None,
    epochs_at: tuple[tuple[int, int], ...],
    sampler: str,
    seed: int,
    trials: int | None,
    timeout_: float | None,
    snapshot: str | None,
    storage: str | None,
    study_name: str | None,
    probe_iterations: int,
    threads: int | None,
    n_train: int | None,
    n_val: int | None,
    data_gb: float | None,
    no_screen: bool,
    top: int,
    as_json: bool,
    plot_file: Path | None,
    backend_spec: str | None,
    cloud_probes: int,
    cloud_config: str | None,
    emulate_cloud_probes: bool,
    server: str | None,
    token: str | None,
) -> None:
    """Recommend where and how to train MODEL: machine, batch size, hyperparameters,
    with time and cost, from an Optuna study scored by cheap probes.

    Example: advisor suggest --model fcn --budget 5
    """
    from advisor.dashboard_view import save_study_note
    from advisor.replay import backend_from_spec
    from advisor.report import build_report, check_feasible
    from advisor.search_spaces.loader import load_space
    from advisor.study import SuggestOptions, run_suggest

    if server and (cloud_probes or cloud_config):  # issue #14: the service has no settings
        raise AdvisorError(
            "--cloud-probes has no meaning with --server (the cloud settings are yours).",
            "drop --cloud-probes/--cloud-config, or run advisor suggest here.",
        )
    if server:  # issue #17: the same request, run by a service
        from advisor.service.remote import suggest_remote

        report = suggest_remote(server, token, locals())
        _show(report, as_json, plot_file, top)
        return
    backend = backend_from_spec(backend_spec) if backend_spec else None
    space = None
    if space_file:
        space = load_space(Path(space_file), None if ":" in model else model)
    options = SuggestOptions(
        model=model,
        framework=framework,
        space=space,
        budget_usd=budget,
        deadline_s=deadline,
        objective=objective,
        probe_budget_usd=probe_budget,
        epochs=epochs,
        at_batch=at_batch,
        epochs_at=epochs_at,
        sampler=sampler,
        seed=seed,
        trials=trials,
        timeout_s=timeout_,
        snapshot=snapshot,
        storage=storage,
        study_name=study_name,
        probe_iterations=probe_iterations,
        threads=threads,
        n_train=n_train,
        n_val=n_val,
        screen=not no_screen,
        data_gb=data_gb,  # issue #14
        cloud_probes=cloud_probes,
        cloud_settings=cloud_config,
        emulate_cloud=emulate_cloud_probes,
    )
    show_progress = not as_json and sys.stderr.isatty()
    if show_progress:
        outcome = _run_with_progress(options, backend)
    else:
        outcome = run_suggest(options, backend)
    check_feasible(outcome)
    report = build_report(outcome)
    save_study_note(outcome.study, report)  # the report as the study's note in the dashboard
    _show(report, as_json, plot_file, top)


def _show(report: dict[str, Any], as_json: bool, plot_file: Path | None, top: int) -> None:
    """Print ``report`` (and write its plots): the local run's and ``--server``'s alike."""
    from advisor.report_plot import plot, plot_html
    from advisor.report_render import render

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


def _run_with_progress(options: Any, backend: Any) -> Any:
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

    from advisor.study import run_suggest

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

        return run_suggest(options, backend, progress=hook)
