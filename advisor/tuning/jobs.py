"""Managed tuning jobs from Python: plan, submit, follow and import them.

The functions a notebook user calls, and the ones ``advisor submit``, ``advisor status`` and
``advisor import`` call::

    from advisor.tuning.jobs import plan_job, submit_job, job_status, import_job

    spec = plan_job("sagemaker", study="fcn-time-1122", image="...", max_trials=12)
    backend = make_backend("sagemaker", role="arn:aws:iam::123456789012:role/SageMaker")
    backend.build_request(spec)        # the exact request (a dry run)
    submission = submit_job(spec, backend)
    job_status(submission.job_id, backend)
    import_job(submission.job_id, backend, study="fcn-time-1122")

``plan_job`` turns a study's recommendation (or a given machine) into the provider-neutral
``TuningSpec``; the back ends in ``advisor.providers`` turn it into each cloud's request and
read the job back as ``TrialResult``s; ``import_job`` turns those into study trials.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError
from advisor.providers import registry
from advisor.providers.catalog import MachineKey
from advisor.providers.tuning import (
    DEFAULT_METRIC,
    REPORTED_METRICS,
    STEP_METRIC,
    Submission,
    TuningBackend,
    TuningSpec,
)
from advisor.tuning.spec import (
    catalog_row,
    spec_for_machine,
    spec_from_study,
)

if TYPE_CHECKING:
    import optuna


PROVIDERS: tuple[str, ...] = registry.backend_names()
PLACEHOLDER_IMAGE = "REPLACE-WITH-IMAGE-URI"
# The back ends' constructor options, by provider.
PROVIDER_OPTIONS: dict[str, tuple[str, ...]] = {p.backend: p.options for p in registry.PROVIDERS}


def make_backend(provider: str, **options: Any) -> TuningBackend:
    """The back end of ``provider`` with its own options (other providers' are ignored)."""
    from advisor.providers.backends import get_backend

    keys = PROVIDER_OPTIONS.get(provider, ())
    return get_backend(provider, **{k: options[k] for k in keys if options.get(k)})


def _backend(backend: TuningBackend | str, options: Mapping[str, Any]) -> TuningBackend:
    return make_backend(backend, **options) if isinstance(backend, str) else backend


def load_study(name: str, storage: str | None = None) -> optuna.Study:
    """The advisor study ``name`` (default storage: the advisor's SQLite file)."""
    import optuna

    from advisor.errors import unknown_value_error
    from advisor.storage.urls import open_storage, resolve_storage

    storage_obj = open_storage(resolve_storage(storage))  # checked: one-line errors
    try:
        return optuna.load_study(study_name=name, storage=storage_obj)
    except KeyError as exc:
        known = [s.study_name for s in optuna.get_all_study_summaries(storage_obj)]
        raise unknown_value_error("study", name, known) from exc


def _study(study: optuna.Study | str, storage: str | None) -> optuna.Study:
    return load_study(study, storage) if isinstance(study, str) else study


# -- plan ----------------------------------------------------------------------------------------


def plan_job(
    backend: TuningBackend | str,
    *,
    study: optuna.Study | str | None = None,
    storage: str | None = None,
    instances: Sequence[str] = (),
    model: str | None = None,
    batch_size: int | None = None,
    epochs: int | None = None,
    tune: Iterable[str] | None = None,
    strategy: str | None = None,
    image: str | None = None,
    catalog: Any = None,
    **options: Any,
) -> TuningSpec:
    """The provider-neutral tuning job: from ``study``'s recommendation, or on ``instances[0]``
    with ``model`` and ``batch_size`` when no study is given.

    ``instances`` override the study's machine (further ones are SageMaker fallbacks);
    ``epochs`` overrides the study's; ``tune`` names the hyperparameters to tune (default: all
    that do not change the runtime); ``strategy`` defaults to the service's best for the space.
    ``options`` go to ``TuningSpec`` (``max_trials``, ``parallel_trials``, ``goal``, ``spot``...).
    Raises ``AdvisorError`` with the fix for anything the job cannot be built from.
    """
    b = _backend(backend, {})
    provider = b.name
    opts = {k: v for k, v in options.items() if v is not None}
    opts["strategy"] = strategy or "bayesian"
    tuned = list(tune) if tune is not None else None
    try:
        if study is not None:
            spec = spec_from_study(
                _study(study, storage),
                provider,
                image=image or PLACEHOLDER_IMAGE,
                tune=tuned,
                instance=instances[0] if instances else None,
                catalog=catalog,
                **opts,
            )
        else:
            spec = _spec_without_study(
                provider, instances, model, batch_size, tuned, image, catalog, opts
            )
        if epochs is not None:
            spec = dataclasses.replace(spec, fixed={**spec.fixed, "epochs": epochs})
        if strategy is None:
            chosen, why = b.default_strategy(spec.hyperparameters)
            if chosen != spec.strategy:
                notes = (*spec.notes, why) if why else spec.notes
                spec = dataclasses.replace(spec, strategy=chosen, notes=notes)
        if len(instances) > 1:
            alts = tuple(b.machine_type(_key(b, i), None) for i in instances[1:])
            spec = dataclasses.replace(spec, alternative_instance_types=alts)
    except ValueError as exc:
        raise AdvisorError(f"Invalid tuning job: {exc}.", "change the values named.") from exc
    check_metric(spec.objective_metric, spec.goal)
    return spec


def check_metric(metric: str, goal: str) -> None:
    """Refuse an objective ``advisor.train`` never reports, or one optimised the wrong way."""
    if metric == STEP_METRIC:  # reported for the calibration ledger, not to tune
        raise AdvisorError(
            f"{STEP_METRIC} (the measured seconds per step) is reported for calibration, "
            "not as a tuning objective.",
            f"use --metric {' or '.join(REPORTED_METRICS)}.",
        )
    if metric not in REPORTED_METRICS:
        raise AdvisorError(
            f"advisor.train does not report '{metric}', so no trial would ever report it.",
            f"use --metric {' or '.join(REPORTED_METRICS)}.",
        )
    if REPORTED_METRICS[metric] != goal:
        raise AdvisorError(
            f"{metric} is better when it is {'larger' if goal == 'minimize' else 'smaller'}, "
            f"but --goal {goal} was given.",
            f"pass --goal {REPORTED_METRICS[metric]}.",
        )


def _key(backend: TuningBackend, instance: str) -> str:
    return MachineKey.named(instance, backend.services[0])


def _spec_without_study(
    provider: str,
    instances: Sequence[str],
    model: str | None,
    batch_size: int | None,
    tuned: list[str] | None,
    image: str | None,
    catalog: Any,
    options: dict[str, Any],
) -> TuningSpec:
    from advisor.evaluation.workload import default_epochs
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
    if unknown:  # an unknown name is refused, not dropped
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
            "epochs": default_epochs(get(model), batch_size),  # issue #19: as suggest counts
        },
        image=image or PLACEHOLDER_IMAGE,
        catalog=catalog,
        **options,
    )


# -- submit and follow ---------------------------------------------------------------------------


def submit_job(spec: TuningSpec, backend: TuningBackend | str, **options: Any) -> Submission:
    """Submit ``spec`` with the environment's credentials; ``options`` build the back end when
    ``backend`` is a provider name."""
    return _backend(backend, options).submit(spec)


def job_status(job: str, backend: TuningBackend | str, **options: Any) -> dict[str, Any]:
    """The tuning job's state and trial counts, as plain data."""
    return _backend(backend, options).status(job)


# -- import --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportSummary:
    """What ``import_job`` did: the training jobs seen, the study trials added, how many of
    those were recorded in the calibration ledger and why the others were not."""

    study: str
    job: str
    trials_seen: int
    trials_added: list[int]
    calibrated: int = 0
    not_calibrated: dict[str, int] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def import_job(
    job: str,
    backend: TuningBackend | str,
    study: optuna.Study | str,
    *,
    storage: str | None = None,
    **options: Any,
) -> ImportSummary:
    """Add the finished trials of tuning job ``job`` to ``study``; importing again adds nothing.
    Each added trial's measured step time goes to the calibration ledger in the study's
    storage (``advisor.tuning.calibration``)."""
    from advisor.storage.urls import resolve_storage
    from advisor.tuning.calibration import TrialLedger, storage_url
    from advisor.tuning.import_results import import_results

    b = _backend(backend, options)
    s = _study(study, storage)
    results = b.results(job)
    url = resolve_storage(storage) if isinstance(study, str) or storage else None
    ledger = TrialLedger(s, storage_url(s, url))
    added = import_results(s, results, b, job, on_imported=ledger)
    return ImportSummary(
        s.study_name, job, len(results), added, ledger.recorded, dict(ledger.skipped)
    )


__all__ = [
    "DEFAULT_METRIC",
    "PROVIDERS",
    "ImportSummary",
    "catalog_row",
    "check_metric",
    "import_job",
    "job_status",
    "load_study",
    "make_backend",
    "plan_job",
    "spec_for_machine",
    "spec_from_study",
    "submit_job",
]
