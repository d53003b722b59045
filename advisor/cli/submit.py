"""`advisor submit`, `advisor status` and `advisor import`: managed hyperparameter tuning on
SageMaker, Vertex AI and Azure ML, from an advisor study's recommendation or a given machine."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from advisor.cli import params as p
from advisor.cli.saved_files import write_text
from advisor.errors import AdvisorError, MissingExtraError
from advisor.tuning.jobs import PROVIDERS


def _provider_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Options naming where the job goes (never credentials: those come from the environment)."""
    options = [
        click.option("--provider", type=click.Choice(PROVIDERS), required=True),
        click.option("--role", help="SageMaker: execution role ARN the training jobs assume."),
        click.option("--region", help="SageMaker: AWS region (default: the environment's)."),
        click.option("--project", help="Vertex: Google Cloud project (default: gcloud's)."),
        click.option("--location", default="us-central1", show_default=True, help="Vertex region."),
        click.option("--subscription", help="Azure: subscription id (or AZURE_SUBSCRIPTION_ID)."),
        click.option("--resource-group", help="Azure: resource group (or AZURE_RESOURCE_GROUP)."),
        click.option("--workspace", help="Azure: ML workspace (or AZUREML_WORKSPACE_NAME)."),
        click.option("--compute", help="Azure: compute cluster the trials run on."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@click.command()
@_provider_options
@click.option(
    "--study",
    "study_name",
    type=p.StudyName(),
    help="Advisor study whose recommendation to tune around.",
)
@p.storage_option()
@click.option(
    "--instance",
    "instances",
    multiple=True,
    help="Machine type or catalog key (repeat for SageMaker fallbacks); overrides the study's.",
)
@click.option(
    "--accelerator",
    help="With --instance: the GPUs attached to a GCP VM type (T4, T4:2, nvidia-tesla-v100), "
    "e.g. --instance n1-standard-8 --accelerator T4.",
)
@click.option("--model", help="Workload to train (with --instance, without --study).")
@click.option(
    "--batch-size", type=p.POSITIVE, help="Batch size (with --instance, without --study)."
)
@click.option("--epochs", type=p.POSITIVE, help="Epochs per trial (default: the study's estimate).")
@click.option(
    "--tune",
    help="Comma-separated hyperparameters to tune (default: all that do not change the runtime).",
)
@click.option(
    "--strategy",
    type=click.Choice(["bayesian", "random", "grid", "hyperband"]),
    help="Search strategy (default: bayesian where the service allows it).",
)
@click.option("--max-trials", type=p.BoundedInt(1, 10_000), default=20, show_default=True)
@click.option("--parallel", type=p.BoundedInt(1, 1_000), default=2, show_default=True)
@click.option("--early-stopping/--no-early-stopping", default=False, show_default=True)
@click.option(
    "--max-runtime",
    type=p.BoundedInt(1, 366 * 86400),
    default=24 * 3600,
    show_default=True,
    help="Seconds each training job may run.",
)
@click.option("--metric", default="val_accuracy", show_default=True, help="Objective metric.")
@click.option(
    "--goal", type=click.Choice(["maximize", "minimize"]), default="maximize", show_default=True
)
@click.option(
    "--image",
    help="Container image holding the advisor package (or, for Azure, azureml:ENV:VERSION).",
)
@click.option("--output", help="Output location: s3://... (SageMaker), gs://... (Vertex).")
@click.option("--job-name", help="Tuning job name (default: advisor-<model>-<time>).")
@click.option("--spot/--on-demand", default=None, help="Spot capacity (default: the study's).")
@click.option("--dry-run", is_flag=True, help="Print the exact request instead of submitting.")
@click.option(
    "--out",
    "out_file",
    type=p.WritablePath(),
    help="With --dry-run: write the request to this file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def submit(
    provider: str,
    study_name: str | None,
    storage: str | None,
    instances: tuple[str, ...],
    accelerator: str | None,
    model: str | None,
    batch_size: int | None,
    epochs: int | None,
    tune: str | None,
    strategy: str | None,
    max_trials: int,
    parallel: int,
    early_stopping: bool,
    max_runtime: int,
    metric: str,
    goal: str,
    image: str | None,
    output: str | None,
    job_name: str | None,
    spot: bool | None,
    dry_run: bool,
    out_file: Path | None,
    as_json: bool,
    **provider_opts: Any,
) -> None:
    """Submit a managed hyperparameter tuning job on the recommended machine and batch size.

    \b
    advisor submit --provider sagemaker --study fcn-time-... --dry-run
    advisor submit --provider vertex --instance n1-standard-8 --model fcn --batch-size 512 \\
        --image us-docker.pkg.dev/P/advisor/advisor:latest --project P --dry-run
    """
    from advisor.tuning.jobs import PLACEHOLDER_IMAGE, make_backend, plan_job

    if image is None and not dry_run:
        raise AdvisorError("Submitting needs the container image.", "pass --image URI.")
    backend = make_backend(provider, **provider_opts)
    instances = _native_names(backend, instances, accelerator)  # catalog keys or native names
    spec = plan_job(
        backend,
        study=study_name,
        storage=storage,
        instances=instances,
        model=model,
        batch_size=batch_size,
        epochs=epochs,
        tune=[t.strip() for t in tune.split(",") if t.strip()] if tune else None,
        strategy=strategy,
        image=image,
        max_trials=max_trials,
        parallel_trials=parallel,
        early_stopping=early_stopping,
        max_runtime_s=max_runtime,
        objective_metric=metric,
        goal=goal,
        output=output,
        job_name=job_name,
        spot=spot,
    )
    from advisor.tuning.jobs import submit_job

    for note in spec.notes:
        click.echo(f"Note: {note}.", err=True)
    if dry_run:
        what = f"{backend.label} request"
        try:
            request = backend.build_request(spec)
        except MissingExtraError as exc:  # issue #28: a dry run needs no cloud SDK
            backend.check(spec)  # the service's limits are checked without it
            request, what = {"plan": spec.to_dict()}, f"{backend.label} job plan"
            click.echo(
                f"Note: {exc.problem} The exact request is built by that SDK, so this is the "
                f"job's plan (machine, batch size, ranges, trials) it is built from; "
                f"{exc.fix} to see the request itself.",
                err=True,
            )
        text = json.dumps(request, indent=2, sort_keys=False, default=str)
        if image is None:
            click.echo(f"Note: no --image given; the {what} shows {PLACEHOLDER_IMAGE}.", err=True)
        if out_file is not None:
            write_text(out_file, text + "\n", what)
            click.echo(f"Wrote the {what} to {out_file}.", err=True)
        else:
            click.echo(text)
        return
    submission = submit_job(spec, backend)
    if as_json:
        click.echo(json.dumps(submission.to_dict(), indent=2, default=str))
        return
    click.echo(f"Submitted {backend.label} tuning job {submission.job_id}")
    click.echo(f"  as: {submission.identity}")
    click.echo(
        f"  machine: {spec.instance_type} x{spec.instance_count}"
        + (f" ({spec.accelerator_count}x {spec.accelerator})" if spec.accelerator else "")
    )
    click.echo(
        f"  tuning: {', '.join(p.name for p in spec.hyperparameters)}; "
        f"{spec.max_trials} trials, {spec.parallel_trials} in parallel, {spec.strategy}"
    )
    click.echo(f"Follow it with: advisor status {submission.job_id} --provider {provider}")


@click.command()
@click.argument("job")
@_provider_options
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status(job: str, as_json: bool, provider: str, **provider_opts: Any) -> None:
    """Show a managed tuning job's state and trial counts."""
    from advisor.tuning.jobs import job_status, make_backend

    backend = make_backend(provider, **provider_opts)
    info = job_status(job, backend)
    if as_json:
        click.echo(json.dumps(info, indent=2, default=str))
        return
    click.echo(f"{backend.label} job {info['job']}: {info['state']}")
    trials = info.get("trials") or {}
    if trials:
        click.echo("  trials: " + ", ".join(f"{k} {v}" for k, v in trials.items() if v))
    if info.get("best_trial"):
        click.echo(f"  best: {info['best_trial']} ({info.get('best_metric')})")


@click.command("import")
@click.argument("job")
@_provider_options
@click.option(
    "--study",
    "study_name",
    type=p.StudyName(),
    required=True,
    help="Advisor study to add the trials to.",
)
@p.storage_option()
@click.option("--json", "as_json", is_flag=True, help="Print the added trials as JSON.")
def import_job(
    job: str,
    study_name: str,
    storage: str | None,
    as_json: bool,
    provider: str,
    **provider_opts: Any,
) -> None:
    """Add a managed tuning job's finished trials to an advisor study (for optuna-dashboard)."""
    from advisor.tuning.jobs import import_job as run_import

    summary = run_import(job, provider, study_name, storage=storage, **provider_opts)
    if as_json:
        click.echo(json.dumps(summary.to_dict()))
        return
    click.echo(
        f"Added {len(summary.trials_added)} of {summary.trials_seen} trials of {job} "
        f"to study '{study_name}'."
    )
    if summary.calibrated or summary.not_calibrated:
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(summary.not_calibrated.items()))
        click.echo(
            f"{summary.calibrated} trial(s) recorded in the calibration ledger "
            f"(advisor calibration)" + (f"; not recorded: {skipped}." if skipped else ".")
        )


def _native_names(backend: Any, names: tuple[str, ...], accelerator: str | None) -> tuple[str, ...]:
    """Each --instance as a catalog key of ``backend``'s services (issue #15).

    The providers' own names resolve (``Standard_NC6s_v3``, ``ml.p3.2xlarge``,
    ``n1-standard-8`` with ``--accelerator T4``); a name the catalog does not know is passed on
    unchanged (the service may still run it), unless ``--accelerator`` was needed to place it.
    """
    if accelerator and not names:
        raise AdvisorError("--accelerator applies to --instance.", "pass --instance too.")
    if not names:
        return names
    from advisor.providers.catalog import load

    catalog = load()
    out = []
    for name in names:
        spot = ":spot" if name.lower().endswith(":spot") else ""
        try:
            try:
                row = catalog.resolve(name, accelerator, backend.services[:1])
            except AdvisorError:
                row = catalog.resolve(name, accelerator, backend.services)
        except AdvisorError:
            if accelerator:
                raise
            out.append(name)
            continue
        out.append(row.key + spot)
    return tuple(out)
