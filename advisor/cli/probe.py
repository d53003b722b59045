"""`advisor probe`: time a few real training iterations of a workload, in a child process."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from advisor.cli import params as p
from advisor.cli.operators_view import operator_options
from advisor.cli.probe_view import check_workload, render, run_with_progress


def _remote_options(fn: Any) -> Any:
    """``--on MACHINE`` and where its job goes (``advisor submit``'s option names; never
    credentials: those come from each cloud's environment); defaults from cloud.yaml."""
    options = [
        click.option(
            "--on",
            metavar="MACHINE",
            help="Probe on this cloud machine in a managed job (ml.g5.xlarge, g2-standard-8, "
            "Standard_NC6s_v3, a catalog key) instead of here.",
        ),
        click.option("--image", help="--on: the advisor's container image (docker/Dockerfile)."),
        click.option("--role", help="--on SageMaker: execution role ARN."),
        click.option("--region", help="--on SageMaker: AWS region."),
        click.option("--project", help="--on Vertex: Google Cloud project."),
        click.option("--location", help="--on Vertex: region (default us-central1)."),
        click.option("--subscription", help="--on Azure ML: subscription id."),
        click.option("--resource-group", help="--on Azure ML: resource group."),
        click.option("--workspace", help="--on Azure ML: workspace."),
        click.option("--compute", help="--on Azure ML: compute cluster."),
        click.option("--output", help="--on: s3://... (SageMaker) or gs://... (Vertex)."),
        click.option("--spot", is_flag=True, help="--on: run the job on spot capacity."),
        p.storage_option(),  # --on: the storage of the probe cache
        click.option("--emulate", is_flag=True, hidden=True, help="--on: run the job here."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@click.command("probe")
@click.option(
    "--model",
    type=p.ModelRef(),
    required=True,
    help="Built-in workload (fcn, simple-cnn, ...) or module:function.",
)
@click.option("--batch-size", type=p.POSITIVE, required=True)
@p.iterations_option()
@p.threads_option("CPU threads (default: all cores; --on: all the machine's).")
@p.framework_option()
@click.option(
    "--device",
    default="cpu",
    show_default=True,
    help="cpu or cuda (--on: the machine's GPU when it has one, else its CPU).",
)
@click.option(
    "--validation-batches",
    type=p.BoundedInt(1, 10_000),
    default=4,
    show_default=True,
    help="Validation batches timed per pass (scaled to the full validation set).",
)
@p.timeout_option()
@click.option("--seed", type=p.SEED, default=0, show_default=True)
@click.option(
    "--out",
    type=p.WritablePath(),
    default=None,
    help="Also write the ProbeResult JSON to this file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line with the ProbeResult.")
@operator_options
@_remote_options
def probe(
    model: str,
    batch_size: int,
    iterations: int,
    threads: int | None,
    framework: str,
    device: str,
    validation_batches: int,
    timeout: float,
    seed: int,
    out: Path | None,
    as_json: bool,
    on: str | None,
    emulate: bool,
    spot: bool,
    storage: str | None,
    top_ops: int | None,
    on_gpu: str | None,
    **cloud: Any,
) -> None:
    """Time a few real training iterations of a workload in a separate process, and trace its
    training step's operators (kept in --out/--json; --top-ops shows them).

    \b
    With --on MACHINE the same probe runs as a short managed training job on that machine
    (SageMaker, Vertex AI, Azure ML) in the advisor's image; its result is cached in the
    study storage and the job's wall time, billed time and cost are printed:
    advisor probe --model fcn --batch-size 256 --on ml.g5.xlarge --image URI \\
        --role arn:aws:iam::123456789012:role/SageMakerRole --output s3://bucket/advisor
    """
    from advisor.errors import AdvisorError
    from advisor.probes.result import ProbeRequest

    if on_gpu is not None and top_ops is None:
        raise AdvisorError("--on-gpu needs --top-ops.", "add e.g. --top-ops 10.")
    check_workload(model, framework)
    if on is not None:
        from advisor.cli.probe_remote import run_remote

        run_remote(model, framework, batch_size, iterations, timeout, on, emulate, spot,
                   storage, out, as_json, cloud)  # fmt: skip
        return
    request = ProbeRequest(
        workload=model,
        batch_size=batch_size,
        framework=framework,
        iterations=iterations,
        threads=threads,
        device=device,
        validation_batches=validation_batches,
        seed=seed,
        timeout_s=timeout,
    )
    from advisor.evaluation.user_code import arms_length

    with arms_length(model, timeout):  # issue #50: each trace of a user model, wall seconds
        trace = None
        if device == "cpu":  # issue #50: the batch against this machine's memory, first
            from advisor.evaluation.probe_fits import check_probe_fits

            trace = check_probe_fits(model, batch_size, framework)
        result = run_with_progress(request)
        if result.ok:  # issue #26: its operator trace and loader time, kept in the result,
            # so advisor predict --probe and the service read the same ones
            from advisor.evaluation.predict_api import ready

            result = ready(result, lambda text: click.echo(text, err=True), trace)
    if as_json:
        click.echo(result.to_json())
    else:
        render(result)
        if result.ok:
            from advisor.cli.operators_view import show_operators

            show_operators(result, top_ops, on_gpu)
    if out is not None:  # after the printed probe, atomically; a failure is one line
        from advisor.cli.saved_files import PRINTED_PROBE, write_text

        write_text(out, result.to_json() + "\n", "probe result", PRINTED_PROBE)
    if not result.ok:
        sys.exit(1)
