"""`advisor predict`: one local probe -> predicted time and cost on machines not probed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from advisor.cli import console as output
from advisor.cli import params as p
from advisor.cli.operators_view import operator_options
from advisor.cli.plan_options import plan_of, plan_options
from advisor.durations import format_duration
from advisor.errors import AdvisorError
from advisor.options import OPTIONS
from advisor.search_spaces.workloads import ModelRef


def _machines(
    names: str | None, snapshot: str | None, filters: dict[str, Any]
) -> tuple[Any, list[Any]]:
    """The machines named (``--instances``) and/or those the SkyPilot-style filters select
    (issue #28: ``--gpus A100:1``, ``--cloud aws``, ``--region us-east-1``); both: the named
    ones the filters keep."""
    from advisor.evaluation.candidates import matches
    from advisor.evaluation.predict_api import resolve_machines
    from advisor.providers import catalog as catalog_mod
    from advisor.search_spaces.filters import narrow
    from advisor.search_spaces.space import MachineFilter

    given = {k: v for k, v in filters.items() if v is not None}
    if names is None and not given:
        raise AdvisorError(
            "No machines to predict on.",
            "pass --instances p3.2xlarge,... or filters such as --gpus A100:1 --cloud aws.",
        )
    wanted = narrow(MachineFilter(), **given)
    catalog = catalog_mod.load(snapshot, region=wanted.region)
    if names is not None:
        catalog, machines = resolve_machines(names, snapshot)
    else:
        machines = catalog.filter(
            providers=wanted.providers,
            accelerators=wanted.accelerators,
            min_gpus=wanted.min_gpus,
            max_gpus=wanted.max_gpus,
        )
    kept = [m for m in machines if not given or m.provider == "local" or matches(m, wanted)]
    if not kept:
        shown = " ".join(f"--{k} {v}" for k, v in given.items())
        raise AdvisorError(
            f"No machine matches {shown}.",
            "widen the filters (`advisor catalog --accelerator NAME` lists who sells what).",
        )
    return catalog, kept


def _iv(iv: Any, fmt: str) -> str:
    return f"{fmt.format(iv.value)} [{fmt.format(iv.low)}-{fmt.format(iv.high)}]"


def _print(rows: list[Any], tables: dict[str, Any], header: str) -> None:
    from rich.table import Table

    # Wide enough for the intervals when piped (rich falls back to 80 columns).
    console = output.console()
    console.print(header)
    table = Table(show_lines=False)
    for col in (
        "#", "machine", "GPUs", "b/GPU", "t2 ms", "training h:mm:ss",
        "source", "limit", "memory/device", "start-up s", "job h:mm:ss", "job cost USD",
    ):  # fmt: skip
        table.add_column(col)
    for i, f in enumerate(rows, 1):
        m, pred = f.machine, f.prediction
        fits = f.fits  # issue #34: a row that does not fit has no time or cost to give
        table.add_row(
            str(i),
            m.key,
            f"{m.accelerator_count}x {m.accelerator}" if m.accelerator else "-",
            str(pred.per_device_batch) if m.accelerator else "-",
            _iv(pred.phases.t2.scale(1000), "{:.1f}") if fits else "-",
            _hms(f.job.training if f.job is not None else f.estimate.runtime) if fits else "-",
            ("probed here, extrapolated" if pred.source == "measured" else pred.source)
            + (f" x{pred.calibration:.2f}" if pred.calibration_points else "")
            + ("" if m.current else f" ({m.lifecycle})")
            + (" (predicted only)" if _predicted_only(m) else ""),
            pred.bottleneck or "-",
            "-" if f.memory is None else f.memory.text(),
            _span(_startup(f), "{:.0f}") if fits else "-",
            _hms(f.job_wall_s) if fits else "-",
            _span(f.job_cost_usd, "{:.2f}") if fits else "-",
        )
    console.print(table)
    _print_limits_and_calibration(rows)
    console.print(
        "\\[interval] in brackets; modelled = predicted from the local probe "
        "(docs/calibration.md); probed here, extrapolated = this machine's probe over the run; "
        "limit = what bounds the step; memory/device = the step's predicted peak per GPU "
        "against its memory (CPU machines: RAM); "
        "start-up = provisioning or VM boot, image pull, data download before training "
        "(priors unless documented, providers/overheads.py); job = start-up + training (what "
        "advisor suggest ranks); job cost = billed start-up + training, rounded once to the "
        "service's billing increment and minimum; the tables below are whole jobs too."
    )
    from advisor.evaluation.predict_api import job_cost

    fitting = [f for f in rows if f.fits]
    if not fitting:  # issue #34
        console.print(
            "None of these machines fits a step at this batch size in its memory (the "
            "memory/device column): no fastest or cheapest; try a smaller --batch-size."
        )
        return
    fastest, cheapest = fitting[0], min(fitting, key=job_cost)
    console.print(
        f"Fastest: {fastest.machine.key}   Cheapest: {cheapest.machine.key} "
        "(whole jobs: start-up included; machines that fit their GPU memory)"
    )
    for kind in ("runtime", "cost"):
        norm = tables[kind]
        cols = sorted({c for row in norm.values() for c in row})
        t = Table(title=f"{kind} / best, by epochs")
        t.add_column("machine")
        for c in cols:
            t.add_column(f"{c} ep")
        for key, row in norm.items():
            t.add_row(key, *(_ratio(row.get(c)) for c in cols))
        console.print(t)


def _ratio(value: float | None) -> str:
    """A cell of a ``/ best`` table: a free machine (cost 0) is "free", never a ratio."""
    if value is None:
        return "-"
    return "free" if value == 0 else f"{value:.2f}"


def _predicted_only(machine: Any) -> bool:
    from advisor.evaluation.candidates import predicted_only

    return predicted_only(machine) is not None


def _hms(span: Any) -> str:
    if span is None:
        return "-"
    return (
        f"{format_duration(span.value)} [{format_duration(span.low)}-{format_duration(span.high)}]"
    )


def _startup(f: Any) -> Any:
    return None if f.overheads is None else f.overheads.wall


def _span(span: Any, fmt: str) -> str:
    return "-" if span is None else _iv(span, fmt)


def row_plan(row: Any) -> str:
    """A row's training plan in words (issue #35): its plan, "fp32" for a GPU's plain float32
    step (a K80 under ``--precision auto``), "fp32 (CPU, as probed)" for a CPU machine."""
    if row.prediction.plan:
        return str(row.prediction.plan)
    return "fp32" if row.machine.accelerator else "fp32 (CPU, as probed)"


def _print_limits_and_calibration(rows: list[Any]) -> None:
    """Name the host-bound machines (the GPU's speed does not decide their time) and show
    each calibration with its evidence (advisor calibration lists them all)."""
    from advisor.prediction.perf.accel import LIMITS

    console = output.console()
    plans = [f"{f.machine.key}: {row_plan(f)}" for f in rows]
    if any(f.prediction.plan for f in rows):  # every row's plan, once one has a plan
        console.print(f"Training plan: {'; '.join(plans)}.", markup=False)
    for limit in ("dispatch", "input"):
        floor = [f.machine.key for f in rows if f.prediction.bottleneck == limit]
        if floor:
            console.print(
                f"{LIMITS[limit]}: {', '.join(floor)} (the host floor's priors decide these "
                "times; the interval carries them)."
            )
    for f in rows:
        if f.prediction.calibration_points:
            console.print(f"{f.machine.key}: {f.prediction.calibration_evidence}")


@click.command()
@click.option(
    "--model",
    "-m",
    type=p.ModelRef(),
    required=True,
    help="Built-in workload (fcn, simple-cnn, ...) or your own module:function.",
)
@click.option("--batch-size", "-b", type=p.POSITIVE, required=True, help="Global batch size.")
@click.option(
    "--instances",
    "-i",
    default=None,
    help="Comma-separated instance types: catalog keys or the providers' own names "
    "(Standard_NC6s_v3, ml.p3.2xlarge, compute-engine:n1-standard-8+T4); or filters below.",
)
@click.option("--gpus", metavar="NAME[:COUNT]", help=OPTIONS["gpus"].help)
@click.option("--cloud", help=OPTIONS["cloud"].help)
@click.option("--region", help=OPTIONS["region"].help)
@click.option("--snapshot", default=None, help="Catalog snapshot (default: newest).")
@click.option("--epochs", type=p.POSITIVE, default=None, help="Epochs (default: the workload's).")
@click.option("--spot", is_flag=True, help="Price with spot/preemptible capacity.")
@click.option(
    "--probe",
    "probe_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Use a saved probe JSON instead of probing now.",
)
@p.threads_option("CPU threads for the local probe.")
@p.framework_option()
@p.timeout_option()
@click.option(
    "--strategy",
    type=click.Choice(["auto", "ddp", "dp"]),
    default="auto",
    show_default=True,
    help="Multi-GPU data parallelism: ddp (process per GPU), dp (one process).",
)
@click.option(
    "--n-train", type=p.POSITIVE, default=None, help="Training samples (default: the model's)."
)
@click.option(
    "--n-val", type=p.COUNT_OR_ZERO, default=None, help="Validation samples (default: the model's)."
)
@click.option(
    "--data-gb",
    type=p.FiniteFloat(0.0, 1e6),
    default=None,
    help="GB of data a cloud job downloads before training (default: a built-in workload's "
    "size; a user model without it leaves the download out).",
)
@plan_options
@operator_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def predict(
    model: str,
    batch_size: int,
    instances: str | None,
    gpus: str | None,
    cloud: str | None,
    region: str | None,
    snapshot: str | None,
    epochs: int | None,
    spot: bool,
    probe_file: Path | None,
    threads: int | None,
    framework: str,
    timeout: float,
    strategy: str,
    n_train: int | None,
    n_val: int | None,
    data_gb: float | None,
    precision: str,
    plan_text: str | None,
    top_ops: int | None,
    on_gpu: str | None,
    as_json: bool,
) -> None:
    """Predict time and cost of training MODEL (a built-in workload or your own
    module:function) on each instance from one local probe: --probe FILE, else the probe
    `advisor suggest` cached here, else a new one -- or, for a model too big or too slow for
    this machine, its training step traced without running it."""
    from advisor.cli.operators_view import show_operators
    from advisor.cli.probe_view import run_with_progress
    from advisor.evaluation.predict_api import load_probe
    from advisor.evaluation.predict_api import predict as run_predict
    from advisor.search_spaces.workloads import get

    if batch_size <= 0:
        raise AdvisorError(f"--batch-size must be > 0, but got {batch_size}.", "pass e.g. 512.")
    if not ModelRef(model).is_user:
        get(model)  # an unknown workload is a one-line error before anything runs
    if on_gpu is not None and top_ops is None:
        raise AdvisorError("--on-gpu needs --top-ops.", "add e.g. --top-ops 10.")
    catalog, machines = _machines(
        instances, snapshot, {"gpus": gpus, "cloud": cloud, "region": region}
    )
    probe = load_probe(probe_file) if probe_file else None
    if probe is not None and probe.workload != model:
        raise AdvisorError(
            f"The probe file is for '{probe.workload}', not '{model}'.",
            f"pass --model {probe.workload} or another probe file.",
        )

    def note(text: str) -> None:
        if not as_json:
            click.echo(text, err=True)

    result = run_predict(
        model,
        batch_size,
        machines=machines,
        catalog=catalog,
        snapshot=snapshot,
        epochs=epochs,
        spot=spot,
        probe=probe,
        threads=threads,
        framework=framework,
        strategy=None if strategy == "auto" else strategy,
        note=note,
        n_train=n_train,
        n_val=n_val,
        data_gb=data_gb,
        precision=precision,
        plan=plan_of(plan_text),
        timeout_s=timeout,
        run_probe=lambda r: run_with_progress(r, show=not as_json and sys.stderr.isatty()),
    )
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
        return
    _print(result.rows, result.tables, _header(result, model, batch_size, spot))
    for warning in result.probe.warnings:
        output.console().print(f"warning (probe): {warning}")
    for line in result.notes:  # #26: how obtained, no local timing; #27: predicted only, ...
        output.console().print(line, markup=False)
    show_operators(result.probe, top_ops, on_gpu)


def _header(result: Any, model: str, batch_size: int, spot: bool) -> str:
    from advisor.prediction.perf.signature import is_untimed, steady_stats

    probe = result.probe
    how = (
        "traced without a local timing"
        if is_untimed(probe)
        else f"probe: {probe.device} x{probe.threads} threads, t2 "
        f"{1000 * steady_stats(probe.iteration_s)[0]:.1f} ms"
    )
    return (
        f"{model}, batch {batch_size}, {result.epochs} epochs, {result.n_train} train / "
        f"{result.n_val} val samples; {how} "
        f"({'spot' if spot else 'on-demand'} prices, snapshot {result.snapshot})"
    )
