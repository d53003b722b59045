"""`advisor estimate`: extrapolate a probe to a full training run (docs/method.md section 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from advisor.cli import console as output
from advisor.cli import params as p
from advisor.errors import AdvisorError
from advisor.search_spaces.workloads import ModelRef


def _default_epochs(workload: str, batch_size: int) -> int:
    from advisor.evaluation.workload import default_epochs
    from advisor.search_spaces.workloads import get

    if ModelRef(workload).is_user:
        return 10
    return default_epochs(get(workload), batch_size)


@click.command("estimate")
@click.option(
    "--probe",
    "probe_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A probe result JSON (from `advisor probe --out`).",
)
@click.option(
    "--model",
    type=p.ModelRef(),
    default=None,
    help="Probe this workload now instead of reading --probe.",
)
@click.option("--batch-size", type=p.POSITIVE, default=None)
@p.iterations_option()
@p.threads_option()
@p.framework_option()
@click.option(
    "--epochs",
    type=p.POSITIVE,
    default=None,
    help="Epochs (default: the workload's epochs to stabilise at this batch size).",
)
@click.option(
    "--n-train",
    type=p.POSITIVE,
    default=None,
    help="Training samples (default: the workload's).",
)
@click.option(
    "--n-val",
    type=p.COUNT_OR_ZERO,
    default=None,
    help="Validation samples (default: the workload's).",
)
@click.option("--price", type=p.USD_OR_ZERO, default=None, help="USD per hour, for the cost.")
@click.option("--no-validation", is_flag=True, help="Use the formula without validation passes.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def estimate(
    probe_file: Path | None,
    model: str | None,
    batch_size: int | None,
    iterations: int,
    threads: int | None,
    framework: str,
    epochs: int | None,
    n_train: int | None,
    n_val: int | None,
    price: float | None,
    no_validation: bool,
    as_json: bool,
) -> None:
    """Predict a full training run's time (and cost) from a probe, with an interval."""
    from advisor.prediction.run import iteration_model as im

    if (probe_file is None) == (model is None):
        raise AdvisorError("Give either --probe FILE or --model NAME.", "pass exactly one of them.")
    if probe_file is not None:
        from advisor.evaluation.probe_source import load_probe

        result = load_probe(probe_file)
    else:
        if batch_size is None:
            raise AdvisorError("--model needs --batch-size.", "add e.g. --batch-size 256.")
        from advisor.cli.probe_view import check_workload, run_with_progress
        from advisor.probes.result import ProbeRequest

        assert model is not None
        check_workload(model, framework)
        from advisor.evaluation.probe_fits import check_probe_fits

        check_probe_fits(model, batch_size, framework)  # issue #50: before it allocates
        request = ProbeRequest(
            model, batch_size, framework=framework, iterations=iterations, threads=threads
        )
        result = run_with_progress(request)
    if not result.ok:
        raise AdvisorError(
            f"The probe failed ({result.status}): {result.error}",
            "fix the workload or try a smaller batch size.",
        )
    b = result.batch_size
    n_tr = n_train or result.n_train
    n_v = result.n_val if n_val is None else n_val
    n_ep = epochs or _default_epochs(result.workload, b)
    validation = not no_validation
    main = im.estimate(result, n_tr, n_v, n_ep, b, price, validation)
    sweep = im.epoch_sweep(result, n_tr, n_v, b, (*im.DEFAULT_EPOCHS, n_ep), price, validation)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "estimate": main.to_dict(),
                    "sweep": {str(k): v.to_dict() for k, v in sweep.items()},
                    "probe": {
                        "workload": result.workload,
                        "batch_size": b,
                        "threads": result.threads,
                        "device": result.device,
                    },
                },
                sort_keys=True,
            )
        )
        return
    _render(result, main, sweep)


def _render(result: Any, main: Any, sweep: dict[int, Any]) -> None:
    from rich.table import Table

    console = output.console()
    r = main.runtime
    console.print(
        f"{result.workload}, batch {main.batch_size}, {main.epochs} epochs x "
        f"{main.iterations_per_epoch} iterations ({main.n_train} train / {main.n_val} val), "
        f"{result.device} {result.threads} threads, phases {main.source}:"
    )
    console.print(f"  runtime {r.value:.1f} s  (interval {r.low:.1f} - {r.high:.1f} s)")
    if main.cost is not None:
        c = main.cost
        console.print(f"  cost    USD {c.value:.4f}  (interval {c.low:.4f} - {c.high:.4f})")
    console.print(f"  formula: {main.formula}; {main.note}")
    table = Table(title="breakdown")
    table.add_column("term")
    table.add_column("seconds", justify="right")
    table.add_column("share", justify="right")
    for name, value in main.breakdown.items():
        table.add_row(name, f"{value:.1f}", f"{value / r.value:.1%}" if r.value else "-")
    console.print(table)
    sw = Table(title="epoch sweep")
    sw.add_column("epochs", justify="right")
    sw.add_column("runtime s (interval)", justify="right")
    if main.cost is not None:
        sw.add_column("cost USD", justify="right")
    for n, est in sweep.items():
        cells = [str(n), f"{est.runtime.value:.1f} ({est.runtime.low:.1f}-{est.runtime.high:.1f})"]
        if est.cost is not None:
            cells.append(f"{est.cost.value:.4f}")
        sw.add_row(*cells)
    console.print(sw)
