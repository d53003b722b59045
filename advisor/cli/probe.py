"""`advisor probe`: time a few real training iterations of a workload, in a child process."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from advisor.cli import output
from advisor.cli import params as p
from advisor.errors import AdvisorError


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
        click.option("--storage", help="--on: Optuna storage URL of the cache (default: SQLite)."),
        click.option("--emulate", is_flag=True, hidden=True, help="--on: run the job here."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def check_workload(model: str, framework: str) -> None:
    """Fail early, with one line, on an unknown built-in model or framework."""
    from advisor.probes.runner import FRAMEWORK_ENTRY
    from advisor.search_spaces.workloads import get

    if framework not in FRAMEWORK_ENTRY:
        raise AdvisorError(
            f"Unknown framework '{framework}'.", f"use one of: {', '.join(FRAMEWORK_ENTRY)}."
        )
    if ":" not in model:
        get(model).builder  # noqa: B018 - raises the one-line "unknown model" error
        if framework not in get(model).builders:
            raise AdvisorError(
                f"Workload '{model}' has no {framework} version.",
                f"use --framework {' or '.join(get(model).builders)}.",
            )


def run_with_progress(request: Any, show: bool) -> Any:
    """Run a probe; show a progress bar on stderr when ``show``."""
    from advisor.probes.runner import run_probe

    if not show:
        return run_probe(request)
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task(f"probing {request.workload} (starting)", total=request.iterations)

        def update(phase: str, done: int, total: int) -> None:
            progress.update(
                task,
                description=f"probing {request.workload} ({phase})",
                completed=done,
                total=total,
            )

        return run_probe(request, on_progress=update)


def _fmt_bytes(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.0f} MiB"


def render(result: Any) -> None:
    """Print a probe's measured phases as a table."""
    from rich.table import Table

    from advisor.probes.iteration_model import phase_times, relative_spread

    console = output.console()
    if not result.ok:
        console.print(f"probe failed ({result.status}): {result.reason}")
        return
    ph = phase_times(result)
    table = Table(
        title=f"probe: {result.workload}, batch {result.batch_size}, "
        f"{result.device}, {result.threads} threads ({result.framework})"
    )
    table.add_column("phase")
    table.add_column("measured", justify="right")
    table.add_column("note")
    from advisor.probes.gradient_noise import from_probe

    spread = relative_spread(result.iteration_s[1:])
    rows = [
        ("init", f"{ph.init.value:.2f} s", result.fingerprint.get("init_note", "")),
        ("t1 (first iteration)", f"{ph.t1.value:.4f} s", ""),
        (
            "t2 (steady, median)",
            f"{ph.t2.value:.4f} s",
            f"90% [{ph.t2.low:.4f}, {ph.t2.high:.4f}], IQR/median {spread:.1%}, "
            f"iterations 2..{len(result.iteration_s)}",
        ),
        ("v1 (first validation)", f"{ph.v1.value:.3f} s", _val_note(result)),
        ("v2 (second validation)", f"{ph.v2.value:.3f} s", ""),
        ("FLOPs / iteration", f"{(result.flops_per_iteration or 0) / 1e9:.2f} G", ""),
        ("samples / s", f"{result.samples_per_s or 0:.0f}", ""),
        ("peak host memory", _fmt_bytes(result.peak_host_memory_bytes), ""),
        ("peak accelerator memory", _fmt_bytes(result.peak_accelerator_memory_bytes), ""),
        ("CPU utilisation", f"{(result.cpu_utilisation or 0):.0%}", ""),
        ("probe wall time", f"{result.wall_s:.1f} s", ""),
    ]
    noise = from_probe(result)  # issue #19
    if noise is not None:
        value = f"{noise.value:.0f}" if noise.resolved else "unresolved (inf)"
        rows.append(
            (
                "gradient noise scale",
                value,
                f"B_simple, {noise.confidence:.0%} [{noise.low:.0f}, {noise.high:.0f}], "
                f"{noise.iterations} batches at {noise.small_batch}/{noise.big_batch}, "
                f"measured in {noise.overhead_s:.1f} s (in the wall time)",
            )
        )
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for warning in result.warnings:
        console.print(f"warning: {warning}")


def _val_note(result: Any) -> str:
    if result.validation_scale == 1.0:
        return f"{result.validation_samples_measured} samples"
    return (
        f"{result.validation_samples_measured} samples measured, scaled x"
        f"{result.validation_scale:.2f} to {result.n_val}"
    )


@click.command("probe")
@click.option(
    "--model",
    type=p.ModelRef(),
    required=True,
    help="Built-in workload (fcn, simple-cnn, ...) or module:function.",
)
@click.option("--batch-size", type=p.POSITIVE, required=True)
@click.option(
    "--iterations",
    type=p.BoundedInt(3, 10_000),
    default=20,
    show_default=True,
    help="Training iterations timed (the first is warm-up).",
)
@click.option(
    "--threads",
    type=p.THREADS,
    default=None,
    help="CPU threads (default: all cores; --on: all the machine's).",
)
@click.option("--framework", default="torch", show_default=True)
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
@click.option(
    "--timeout",
    type=p.FiniteFloat(0.1, 366 * 86400.0),
    default=300.0,
    show_default=True,
    help="Seconds before the probe is killed.",
)
@click.option("--seed", type=p.SEED, default=0, show_default=True)
@click.option(
    "--out",
    type=p.WritablePath(),
    default=None,
    help="Also write the ProbeResult JSON to this file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line with the ProbeResult.")
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
    **cloud: Any,
) -> None:
    """Time a few real training iterations of a workload in a separate process.

    \b
    With --on MACHINE the same probe runs as a short managed training job on that machine
    (SageMaker, Vertex AI, Azure ML) in the advisor's image; its result is cached in the
    study storage and the job's wall time, billed time and cost are printed:
    advisor probe --model fcn --batch-size 256 --on ml.g5.xlarge --image URI \\
        --role arn:aws:iam::123456789012:role/SageMakerRole --output s3://bucket/advisor
    """
    from advisor.probes.result import ProbeRequest

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
    result = run_with_progress(request, show=not as_json and sys.stderr.isatty())
    if out is not None:
        out.write_text(result.to_json() + "\n", encoding="utf-8")
    if as_json:
        click.echo(result.to_json())
    else:
        render(result)
    if not result.ok:
        sys.exit(1)
