"""`advisor calibration`: what the performance model has learnt from measured runs (the ledger),
and `advisor calibration record` to add a measured run by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from advisor.cli import console as output
from advisor.cli import params as p
from advisor.errors import AdvisorError

_STORAGE = p.storage_option()  # the storage holding the calibration ledger


def _summary(records: list[Any], storage: str | None) -> list[dict[str, Any]]:
    """One row per (device class, workload): the correction a prediction would get."""
    from advisor.prediction.timing.correction import calibration_factor

    rows = []
    seen: set[tuple[str, str]] = set()
    for r in records:
        key = (r.device_class, r.workload)
        if key in seen:
            continue
        seen.add(key)
        cal = calibration_factor(r.device_class, r.workload, storage)
        rows.append(
            {
                "device_class": r.device_class,
                "workload": r.workload,
                "factor": cal.factor,
                "spread": cal.spread,
                "points": cal.points,
                "scope": cal.scope,
            }
        )
    return rows


@click.group(invoke_without_command=True)
@_STORAGE
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def calibration(ctx: click.Context, storage: str | None, as_json: bool) -> None:
    """List what the performance model has learnt: measured vs predicted runs per machine
    and the correction each device class gets."""
    if ctx.invoked_subcommand is not None:
        return
    from dataclasses import asdict

    from advisor.prediction.timing.correction import load_records

    records = load_records(storage)
    summary = _summary(records, storage)
    if as_json:
        click.echo(
            json.dumps({"records": [asdict(r) for r in records], "corrections": summary}, indent=1)
        )
        return
    console = output.console()
    if not records:
        console.print(
            "Nothing learnt yet: no measured run is in the ledger. Record one with "
            "`advisor calibration record` (remote probes and imported trials add theirs)."
        )
        return
    from rich.table import Table

    table = Table(title="Measured runs (the ledger)")
    for col in (
        "machine",
        "class",
        "workload",
        "batch",
        "predicted ms",
        "measured ms",
        "x",
        "origin",
    ):
        table.add_column(col)
    for r in records:
        table.add_row(
            r.machine,
            r.device_class,
            r.workload,
            str(r.batch_size),
            f"{r.predicted_t2 * 1e3:.3g}",
            f"{r.measured_t2 * 1e3:.3g}",
            f"{r.ratio:.2f}",
            r.origin or "-",
        )
    console.print(table)
    learnt = Table(title="Corrections applied to the next predictions")
    for col in ("class", "workload", "factor", "spread x/", "runs", "from"):
        learnt.add_column(col)
    for s in summary:
        learnt.add_row(
            s["device_class"],
            s["workload"],
            f"{s['factor']:.2f}",
            f"{s['spread']:.2f}",
            str(s["points"]),
            s["scope"],
        )
    console.print(learnt)
    console.print(
        "Other workloads on a class fall back to all of its runs; a class with no runs is "
        "not corrected."
    )


@calibration.command("record")
@click.option("--instance", "-i", required=True, help="The machine the run was measured on.")
@click.option(
    "--probe",
    "probe_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The local probe JSON the prediction is made from (`advisor probe --json`).",
)
@click.option("--batch-size", "-b", type=int, required=True, help="Global batch of the run.")
@click.option(
    "--measured-step-s", type=float, required=True, help="Measured seconds per training step."
)
@click.option("--origin", default="manual", show_default=True, help="Where it was measured.")
@click.option("--snapshot", default=None, help="Catalog snapshot (default: newest).")
@_STORAGE
def record(
    instance: str,
    probe_file: Path,
    batch_size: int,
    measured_step_s: float,
    origin: str,
    snapshot: str | None,
    storage: str | None,
) -> None:
    """Add a measured run on INSTANCE to the ledger next to the model's prediction for it."""
    from advisor.evaluation.predict_api import load_probe, resolve_machines
    from advisor.prediction.timing.model import record_run

    catalog, machines = resolve_machines(instance, snapshot)
    if len(machines) != 1:
        raise AdvisorError("Pass exactly one --instance.", "e.g. --instance p3.2xlarge")
    probe = load_probe(probe_file)
    rec = record_run(probe, machines[0], catalog, batch_size, measured_step_s, origin, storage)
    click.echo(f"Recorded {rec.describe()}.")
