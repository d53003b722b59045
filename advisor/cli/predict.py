"""`advisor predict`: one local probe -> predicted time and cost on machines not probed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from advisor.cli import output
from advisor.cli import params as p
from advisor.errors import AdvisorError


def _load_probe(path: Path) -> Any:
    from advisor.probes.result import ProbeResult

    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise AdvisorError(
            f"Cannot read probe file {path} ({exc}).", "pass a probe JSON file."
        ) from exc
    if isinstance(data, dict) and isinstance(data.get("probe"), dict):
        data = data["probe"]
    try:
        return ProbeResult.from_dict(data)
    except (TypeError, ValueError) as exc:
        raise AdvisorError(
            f"{path} is not a probe result ({exc}).",
            "save one with `advisor probe --json` or ProbeResult.to_json().",
        ) from exc


def _run_probe(model: str, batch: int, framework: str, threads: int | None, quiet: bool) -> Any:
    from advisor.cli.probe import run_with_progress
    from advisor.probes.result import ProbeRequest

    request = ProbeRequest(workload=model, batch_size=batch, framework=framework, threads=threads)
    return run_with_progress(request, show=not quiet and sys.stderr.isatty())


def _traced(probe: Any, quiet: bool) -> Any:
    """Add the traced op count, activation bytes and loader time to a torch probe that lacks
    them (refines the GPU host terms); on failure keep the model's priors and say so."""
    from advisor.probes.perf.trace import TRACE_KEYS, trace_torch_step, with_trace

    if probe.framework != "torch" or all(k in probe.fingerprint for k in TRACE_KEYS):
        return probe
    try:
        trace = trace_torch_step(probe.workload, probe.batch_size)
    except Exception as exc:  # the trace only refines priors: never fail the prediction
        if not quiet:
            click.echo(f"Note: could not trace a training step ({exc}); using priors.", err=True)
        return probe
    return with_trace(probe, trace)


def _machines(names: str, snapshot: str | None) -> tuple[Any, list[Any]]:
    from advisor.providers import catalog as catalog_mod

    catalog = catalog_mod.load(snapshot)
    machines = []
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        machines.append(
            catalog_mod.local_machine() if name in ("local", "local:local") else catalog.get(name)
        )
    if not machines:
        raise AdvisorError("No instances given.", "pass --instances p3.2xlarge,p2.xlarge,...")
    return catalog, machines


def _iv(iv: Any, fmt: str) -> str:
    return f"{fmt.format(iv.value)} [{fmt.format(iv.low)}-{fmt.format(iv.high)}]"


def _duration(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}"


def _print(rows: list[Any], tables: dict[str, Any], header: str) -> None:
    from rich.table import Table

    # Wide enough for the intervals when piped (rich falls back to 80 columns).
    console = output.console()
    console.print(header)
    table = Table(show_lines=False)
    for col in (
        "#", "machine", "GPUs", "b/GPU", "t2 ms", "runtime h:mm:ss", "cost USD", "source",
        "limit",
    ):  # fmt: skip
        table.add_column(col)
    for i, f in enumerate(rows, 1):
        m, pred, est = f.machine, f.prediction, f.estimate
        rt = est.runtime
        table.add_row(
            str(i),
            m.key,
            f"{m.accelerator_count}x {m.accelerator}" if m.accelerator else "-",
            str(pred.per_device_batch) if m.accelerator else "-",
            _iv(pred.phases.t2.scale(1000), "{:.1f}"),
            f"{_duration(rt.value)} [{_duration(rt.low)}-{_duration(rt.high)}]",
            _iv(est.cost, "{:.2f}") if est.cost is not None else "-",
            pred.source,
            pred.bottleneck or "-",
        )
    console.print(table)
    console.print(
        "[interval] in brackets; modelled = predicted from the local probe "
        "(docs/calibration.md), measured = this machine; limit = what bounds the step."
    )
    fastest = rows[0]
    cheapest = min(rows, key=lambda f: f.estimate.cost.value if f.estimate.cost else 0.0)
    console.print(f"Fastest: {fastest.machine.key}   Cheapest: {cheapest.machine.key}")
    for kind in ("runtime", "cost"):
        norm = tables[kind]
        cols = sorted({c for row in norm.values() for c in row})
        t = Table(title=f"{kind} / best, by epochs")
        t.add_column("machine")
        for c in cols:
            t.add_column(f"{c} ep")
        for key, row in norm.items():
            t.add_row(key, *(f"{row[c]:.2f}" if c in row else "-" for c in cols))
        console.print(t)


@click.command()
@click.option(
    "--model", "-m", type=p.ModelRef(), required=True, help="Workload name, e.g. fcn, simple-cnn."
)
@click.option("--batch-size", "-b", type=p.POSITIVE, required=True, help="Global batch size.")
@click.option("--instances", "-i", required=True, help="Comma-separated instance types.")
@click.option("--snapshot", default=None, help="Catalog snapshot (default: newest).")
@click.option("--epochs", type=p.POSITIVE, default=None, help="Epochs (default: the workload's).")
@click.option("--spot", is_flag=True, help="Price with spot/preemptible capacity.")
@click.option(
    "--probe",
    "probe_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Use a saved probe JSON instead of probing now.",
)
@click.option("--threads", type=p.THREADS, default=None, help="CPU threads for the local probe.")
@click.option("--framework", default="torch", show_default=True, help="torch or keras.")
@click.option(
    "--strategy",
    type=click.Choice(["auto", "ddp", "dp"]),
    default="auto",
    show_default=True,
    help="Multi-GPU data parallelism: ddp (process per GPU), dp (one process).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def predict(
    model: str,
    batch_size: int,
    instances: str,
    snapshot: str | None,
    epochs: int | None,
    spot: bool,
    probe_file: Path | None,
    threads: int | None,
    framework: str,
    strategy: str,
    as_json: bool,
) -> None:
    """Predict time and cost of training MODEL on each instance from one local probe."""
    from advisor.probes.perf.report import forecast, normalised_tables
    from advisor.probes.perf.signature import steady_stats
    from advisor.search_spaces.workloads import get

    if batch_size <= 0:
        raise AdvisorError(f"--batch-size must be > 0, but got {batch_size}.", "pass e.g. 512.")
    workload = get(model)
    catalog, machines = _machines(instances, snapshot)
    probe = _load_probe(probe_file) if probe_file else None
    if probe is not None and probe.workload != model:
        raise AdvisorError(
            f"The probe file is for '{probe.workload}', not '{model}'.",
            f"pass --model {probe.workload} or another probe file.",
        )
    if probe is None:
        probe = _run_probe(model, batch_size, framework, threads, as_json)
    if not probe.ok:
        raise AdvisorError(
            f"The probe of {model} at batch {batch_size} failed ({probe.status}: {probe.error}).",
            "try a smaller batch size or check the workload.",
        )
    probe = _traced(probe, as_json)
    epochs = epochs or workload.epochs_for(batch_size)
    n_train = probe.n_train or workload.n_train
    n_val = probe.n_val if probe.n_train else workload.n_val
    rows = forecast(
        probe,
        machines,
        catalog,
        batch_size,
        epochs,
        n_train,
        n_val,
        spot=spot,
        strategy=None if strategy == "auto" else strategy,
    )
    tables = normalised_tables(rows)
    if as_json:
        cheapest = min(rows, key=lambda f: f.estimate.cost.value if f.estimate.cost else 0.0)
        out = {
            "workload": model,
            "batch_size": batch_size,
            "epochs": epochs,
            "snapshot": getattr(catalog, "snapshot", snapshot),
            "spot": spot,
            "probe": probe.to_dict(),
            "machines": [f.to_dict() for f in rows],
            "fastest": rows[0].machine.key,
            "cheapest": cheapest.machine.key,
            "normalised": {
                k: {m: {str(c): v for c, v in row.items()} for m, row in t.items()}
                for k, t in tables.items()
            },
        }
        click.echo(json.dumps(out, indent=1))
        return
    header = (
        f"{model}, batch {batch_size}, {epochs} epochs, {n_train} train / {n_val} val samples; "
        f"probe: {probe.device} x{probe.threads} threads, t2 "
        f"{1000 * steady_stats(probe.iteration_s)[0]:.1f} ms "
        f"({'spot' if spot else 'on-demand'} prices, snapshot "
        f"{getattr(catalog, 'snapshot', snapshot)})"
    )
    _print(rows, tables, header)
    for warning in probe.warnings:
        output.console().print(f"warning (probe): {warning}")
