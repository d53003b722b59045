"""`advisor predict`: one local probe -> predicted time and cost on machines not probed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from advisor.cli import params as p
from advisor.cli.operators_view import operator_options
from advisor.cli.plan_options import plan_of, plan_options, precision_of
from advisor.cli.predict_view import row_plan as row_plan  # re-exported
from advisor.errors import AdvisorError
from advisor.options import OPTIONS
from advisor.search_spaces.hf.flags import METHOD_HELP, SEQ_LEN_HELP, TOKENS_HELP, apply_flags
from advisor.search_spaces.hf.ref import METHODS
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
            "No machines to predict on: `advisor predict` needs --instances (-i) or a filter "
            "(--gpus, --cloud, --region).",
            "name them, e.g. -i ec2:p3.2xlarge,ec2:g5.xlarge, or choose them, e.g. --gpus "
            "A100:1 --cloud aws (`advisor catalog` lists the machines).",
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
    "(Standard_NC6s_v3, ml.p3.2xlarge, compute-engine:n1-standard-8+T4). Needed unless "
    "--gpus, --cloud or --region choose the machines.",
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
@click.option(
    "--nodes",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Machines of each type joined by their network under torchrun (issue #49): the "
    "batch split over every GPU, N prices, the slowest of N start-ups; types with no cited "
    "network figure are left out.",
)
@click.option("--method", type=click.Choice(METHODS), default=None, help=METHOD_HELP)
@click.option("--seq-len", type=p.POSITIVE, default=None, help=SEQ_LEN_HELP)
@click.option("--tokens", type=p.POSITIVE, default=None, help=TOKENS_HELP)
@plan_options
@operator_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--verbose",
    is_flag=True,
    help="Show each machine's step terms: device, host, input and the data-parallel ones.",
)
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
    nodes: int,
    method: str | None,
    seq_len: int | None,
    tokens: int | None,
    precision: str,
    plan_text: str | None,
    top_ops: int | None,
    on_gpu: str | None,
    as_json: bool,
    verbose: bool,
) -> None:
    """Predict time and cost of training MODEL (a built-in workload or your own
    module:function) on each instance from one local probe: --probe FILE, else the probe
    `advisor suggest` cached here, else a new one -- or, for a model too big or too slow for
    this machine, its training step traced without running it.

    The machines are needed: name them with --instances (-i), or choose them with --gpus,
    --cloud and --region (both: the named ones the filters keep).

    \b
    Example: advisor predict -m fcn -b 512 -i ec2:p3.2xlarge,ec2:g5.xlarge --spot
             advisor predict -m resnet50 -b 256 --gpus A100:1 --cloud aws
    """
    from advisor.cli.operators_view import show_operators
    from advisor.cli.predict_view import print_table, say
    from advisor.cli.probe_view import probe_reporting
    from advisor.cli.progress import reporting
    from advisor.evaluation.predict_api import load_probe
    from advisor.evaluation.predict_api import predict as _predict
    from advisor.search_spaces.workloads import get

    if batch_size <= 0:
        raise AdvisorError(f"--batch-size must be > 0, but got {batch_size}.", "pass e.g. 512.")
    model, n_train, epochs = apply_flags(model, n_train, method, seq_len, tokens, epochs)  # #48
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

    with reporting() as hook:  # issue #50: the probe, the trace, each machine
        hook("predict:obtaining the probe (cached, timed here, or traced) and its step", 0, 1)
        result = _predict(
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
            precision=precision_of(plan_text, precision),
            plan=plan_of(plan_text),
            run_probe=lambda r: probe_reporting(r, hook),
            progress=hook,
            timeout_s=timeout,
            nodes=nodes,
        )
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
        return
    print_table(result.rows, result.tables, _header(result, model, batch_size, spot))
    for warning in result.probe.warnings:
        say(f"warning (probe): {warning}")
    for line in result.notes:  # #26: how obtained, no local timing; #27: predicted only, ...
        say(line)
    if verbose:  # issue #47: the terms behind each row's step
        for row in result.to_dict()["machines"]:
            terms = (row.get("prediction") or {}).get("phases", {}).get("note")
            if terms:
                say(f"{row['machine']}: {terms}")
    show_operators(result.probe, top_ops, on_gpu)


def _header(result: Any, model: str, batch_size: int, spot: bool) -> str:
    from advisor.prediction.step.ready import is_untimed
    from advisor.prediction.timing.signature import steady_stats

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
