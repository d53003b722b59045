"""`advisor submit`, `advisor status` and `advisor import`: managed hyperparameter tuning on
SageMaker, Vertex AI and Azure ML, from an advisor study's recommendation or a given machine."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from advisor.cli import params as p
from advisor.errors import AdvisorError

PROVIDERS = ("sagemaker", "vertex", "azureml")
PLACEHOLDER_IMAGE = "REPLACE-WITH-IMAGE-URI"


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


def make_backend(provider: str, **opts: Any) -> Any:
    """The back end with the provider's own options (others are ignored)."""
    from advisor.providers.registry import get_backend

    keys = {
        "sagemaker": {"role": "role", "region": "region"},
        "vertex": {"project": "project", "location": "location"},
        "azureml": {
            "subscription": "subscription",
            "resource_group": "resource_group",
            "workspace": "workspace",
            "compute": "compute",
        },
    }[provider]
    return get_backend(provider, **{k: opts[o] for o, k in keys.items() if opts.get(o)})


@click.command()
@_provider_options
@click.option(
    "--study",
    "study_name",
    type=p.StudyName(),
    help="Advisor study whose recommendation to tune around.",
)
@click.option("--storage", help="Optuna storage URL (default: the advisor's SQLite file).")
@click.option(
    "--instance",
    "instances",
    multiple=True,
    help="Machine type or catalog key (repeat for SageMaker fallbacks); overrides the study's.",
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
    from advisor.providers import tuning

    if image is None and not dry_run:
        raise AdvisorError("Submitting needs the container image.", "pass --image URI.")
    backend = make_backend(provider, **provider_opts)
    options: dict[str, Any] = {
        "strategy": strategy or "bayesian",
        "max_trials": max_trials,
        "parallel_trials": parallel,
        "early_stopping": early_stopping,
        "max_runtime_s": max_runtime,
        "objective_metric": metric,
        "goal": goal,
        "output": output,
        "job_name": job_name,
    }
    if spot is not None:
        options["spot"] = spot
    tuned = [t.strip() for t in tune.split(",") if t.strip()] if tune else None
    try:
        if study_name:
            spec = tuning.spec_from_study(
                _load_study(study_name, storage),
                provider,
                image=image or PLACEHOLDER_IMAGE,
                tune=tuned,
                instance=instances[0] if instances else None,
                **options,
            )
        else:
            spec = _spec_without_study(
                provider, instances, model, batch_size, tuned, image or PLACEHOLDER_IMAGE, options
            )
        if epochs is not None:
            spec = _replace_fixed(spec, epochs=epochs)
        if strategy is None:
            chosen, why = backend.default_strategy(spec.hyperparameters)
            if chosen != spec.strategy:
                import dataclasses

                spec = dataclasses.replace(spec, strategy=chosen, notes=(*spec.notes, why))
        if len(instances) > 1:
            import dataclasses

            alts = tuple(backend.machine_type(_key(backend, i), None) for i in instances[1:])
            spec = dataclasses.replace(spec, alternative_instance_types=alts)
    except ValueError as exc:
        raise AdvisorError(f"Invalid tuning job: {exc}.", "change the values named.") from exc
    for note in spec.notes:
        click.echo(f"Note: {note}.", err=True)
    if dry_run:
        request = backend.build_request(spec)
        text = json.dumps(request, indent=2, sort_keys=False, default=str)
        if image is None:
            click.echo(f"Note: no --image given; the request shows {PLACEHOLDER_IMAGE}.", err=True)
        if out_file is not None:
            out_file.write_text(text + "\n")
            click.echo(f"Wrote the {backend.label} request to {out_file}.", err=True)
        else:
            click.echo(text)
        return
    submission = backend.submit(spec)
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
    backend = make_backend(provider, **provider_opts)
    info = backend.status(job)
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
@click.option("--storage", help="Optuna storage URL (default: the advisor's SQLite file).")
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
    from advisor.providers.tuning import import_results

    backend = make_backend(provider, **provider_opts)
    study = _load_study(study_name, storage)
    results = backend.results(job)
    added = import_results(study, results, provider, job)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "study": study_name,
                    "job": job,
                    "trials_seen": len(results),
                    "trials_added": added,
                }
            )
        )
        return
    click.echo(f"Added {len(added)} of {len(results)} trials of {job} to study '{study_name}'.")


def _load_study(name: str, storage: str | None) -> Any:
    import optuna

    from advisor.errors import unknown_value_error
    from advisor.study import open_storage, resolve_storage

    url = resolve_storage(storage)
    storage_obj = open_storage(url)
    try:
        return optuna.load_study(study_name=name, storage=storage_obj)
    except KeyError as exc:
        known = [s.study_name for s in optuna.get_all_study_summaries(storage_obj)]
        raise unknown_value_error("study", name, known) from exc


def _key(backend: Any, instance: str) -> str:
    return instance if ":" in instance else f"{backend.services[0]}:{instance}"


def _spec_without_study(
    provider: str,
    instances: tuple[str, ...],
    model: str | None,
    batch_size: int | None,
    tuned: list[str] | None,
    image: str,
    options: dict[str, Any],
) -> Any:
    from advisor.providers.tuning import spec_for_machine
    from advisor.search_spaces.loader import default_space
    from advisor.search_spaces.workloads import get

    if not instances or not model or batch_size is None:
        raise AdvisorError(
            "Without --study, the machine, model and batch size must be given.",
            "pass --study NAME, or --instance T --model M --batch-size B.",
        )
    space = default_space(model)
    names = [p.name for p in space.hyperparameters]
    unknown = sorted(set(tuned or ()) - set(names))
    if unknown:  # issue #18: an unknown name is refused, not dropped
        raise AdvisorError(
            f"--tune names {', '.join(unknown)}, which the {model} space does not have.",
            f"use some of: {', '.join(names) or '(none)'}.",
        )
    params = [p for p in space.hyperparameters if tuned is None or p.name in tuned]
    return spec_for_machine(
        provider,
        instances[0],
        workload=model,
        hyperparameters=tuple(params),
        fixed={
            "model": model,
            "batch_size": batch_size,
            "epochs": get(model).epochs_for(batch_size),
        },
        image=image,
        **options,
    )


def _replace_fixed(spec: Any, **values: Any) -> Any:
    import dataclasses

    return dataclasses.replace(spec, fixed={**spec.fixed, **values})
