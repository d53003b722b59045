"""Managed tuning results into an advisor study: each training job becomes one trial.

A trial records what actually ran: the provider, the machine the service reports (priced from
the catalog at the spot or on-demand rate it ran at), the hyperparameters the service chose and
the metric it read. Its ``source`` is ``managed``: imported trials are kept apart from the
study's screening trials and never become the recommendation by themselves.

Issue #27: a trial's cost follows the one cost rule: the bill the service reports (SageMaker's
BillableTimeInSeconds) where it reports one, else the measured run time with the billed
start-up terms it leaves out added (or the unbilled ones it includes taken off) and the
service's billing rule applied once (``providers.overheads.bill_measured_job``) -- not the run
time x the price. The interval is the start-up priors'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError
from advisor.intervals import Interval
from advisor.providers.tuning import TrialResult, TuningBackend
from advisor.records import ManagedRun, TrialRecord, is_accuracy_trial, is_managed, managed_job
from advisor.search_spaces.space import space_from_dict
from advisor.study.selection import recommended_trial

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution

    from advisor.providers.catalog import InstanceType

FINISHED = ("completed", "stopped", "failed")


def import_results(
    study: optuna.Study,
    results: Iterable[TrialResult],
    backend: type[TuningBackend] | TuningBackend,
    job: str,
    catalog: Any = None,
    on_imported: Callable[[TrialResult, InstanceType | None, int | None], None] | None = None,
) -> list[int]:
    """Add each finished training job of tuning job ``job`` to ``study``; return the new trial
    numbers. Jobs already imported, and running or pending ones, are skipped.

    Completed jobs with a metric are COMPLETE with the study's objectives measured (run time,
    and cost at the price of the machine and tier that ran); jobs stopped early with a metric
    are PRUNED (their last metric kept in the record); failed or metric-less ones are FAIL.
    ``on_imported(result, catalog row, batch size)`` is called for each job added (the
    calibration ledger records its measured step time: ``advisor.tuning.calibration``).
    """
    import optuna

    names = list(study.metric_names or ["runtime_s", "cost_usd"][: len(study.directions)])
    known = _known_distributions(study)
    done = {managed_job(t) for t in study.get_trials(deepcopy=False) if is_managed(t)}
    added = []
    for r in results:
        if r.job_name in done or r.status not in FINISHED:
            continue
        row = machine_row(backend, r, catalog)
        spot = bool(r.spot)
        key = f"{row.key}:spot" if row is not None and spot else (row.key if row else None)
        price = _price(row, spot)
        params, dists = _typed_params(r.hyperparameters, known)
        machines = known.get("machine")
        if key is not None and machines is not None and key in getattr(machines, "choices", ()):
            params["machine"], dists["machine"] = key, machines
            batch_dist, batch = known.get("batch_size"), _ran_with(r, "batch_size", study)
            if batch_dist is not None and batch in getattr(batch_dist, "choices", ()):
                params["batch_size"], dists["batch_size"] = batch, batch_dist
        runtime = Interval(r.runtime_s, r.runtime_s, r.runtime_s) if r.runtime_s else None
        cost = job_cost(row, r, price)  # issue #27: the one cost rule
        cost_v = cost.value if cost is not None else None
        record = TrialRecord(
            machine=key or f"{backend.name}:{r.instance_type}",
            batch_size=int(_ran_with(r, "batch_size", study) or 0),
            source="managed",
            price_per_hour=price,
            spot=spot,
            epochs=_ran_with(r, "epochs", study),
            runtime=runtime,
            cost=cost,
            # A measurement, not a candidate: the study's selection (``feasible_trials``)
            # skips it, so an imported job never becomes the recommendation by itself.
            feasible=False,
            managed=ManagedRun(
                provider=backend.name,
                tuning_job=job,
                job_name=r.job_name,
                metric_name=r.metric_name,
                metric=r.metric,
                status=r.status,
                instance_type=r.instance_type,
                billable_s=r.billable_s,
            ),
        )
        measured = {"runtime_s": r.runtime_s, "cost_usd": cost_v, r.metric_name: r.metric}
        values = [v for n in names if (v := measured.get(n)) is not None]
        if r.status == "completed" and r.metric is not None and len(values) == len(names):
            state, vals = optuna.trial.TrialState.COMPLETE, [float(v) for v in values]
        elif r.status == "stopped" and r.metric is not None:
            state, vals = optuna.trial.TrialState.PRUNED, None
        else:
            state, vals = optuna.trial.TrialState.FAIL, None
        try:
            trial = optuna.trial.create_trial(
                params=params,
                distributions=dists,
                values=vals,
                state=state,
                user_attrs=record.to_attrs(),
            )
        except ValueError as exc:
            raise AdvisorError(
                f"{r.job_name} does not fit study '{study.study_name}': {exc}",
                "import into the study the job was submitted from.",
            ) from exc
        study.add_trial(trial)
        added.append(study.trials[-1].number)
        if on_imported is not None:
            on_imported(r, row, record.batch_size or None)
    return added


def job_cost(row: InstanceType | None, r: TrialResult, price: float | None) -> Interval | None:
    """USD of a finished training job by the one cost rule (module docstring); None without a
    price or a run time."""
    from advisor.providers.overheads import bill_measured_job
    from advisor.providers.pricing import usd

    if price is None or (r.runtime_s is None and r.billable_s is None):
        return None
    if row is None or r.runtime_s is None:  # no service to bill by: the reported bill only
        if r.billable_s is None:
            return None
        v = usd(r.billable_s, price)
        return Interval(v, v, v)
    billed, _ = bill_measured_job(row.provider, row.service, r.runtime_s, r.billable_s)
    return Interval(usd(billed.value, price), usd(billed.low, price), usd(billed.high, price))


def machine_row(
    backend: type[TuningBackend] | TuningBackend, result: TrialResult, catalog: Any = None
) -> InstanceType | None:
    """The catalog row of the machine a training job ran on (the managed service's own row
    first), or None when the service did not say or the catalog does not list it."""
    if not result.instance_type:
        return None
    if catalog is None:
        from advisor.providers.catalog import load

        catalog = load()
    rows = [r for r in catalog.instances if r.service in backend.services]
    rows.sort(key=lambda r: backend.services.index(r.service))
    for row in rows:
        try:
            mapped = backend.machine_type(row.key, row)
        except AdvisorError:
            continue
        if mapped == result.instance_type and backend.same_accelerator(row, result):
            return row
    return None


def _price(row: InstanceType | None, spot: bool) -> float | None:
    if row is None:
        return None
    if spot and row.spot_usd_per_h is not None:
        return row.spot_usd_per_h
    return None if spot else row.on_demand_usd_per_h


def _known_distributions(study: optuna.Study) -> dict[str, BaseDistribution]:
    """Each param's distribution as the study's trials (and space) define it."""
    from advisor.search_spaces.convert import param_to_optuna

    dists: dict[str, BaseDistribution] = {}
    if "space" in study.user_attrs:
        for p in space_from_dict(study.user_attrs["space"]).hyperparameters:
            dists[p.name] = param_to_optuna(p)
    for t in study.get_trials(deepcopy=False):
        if not is_accuracy_trial(t):  # issue #29: their batch sizes are a few neighbours
            dists.update(t.distributions)
    return dists


def _typed_params(
    values: dict[str, Any], known: dict[str, BaseDistribution]
) -> tuple[dict[str, Any], dict[str, BaseDistribution]]:
    """The service's hyperparameter values typed to the study's distributions."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    params: dict[str, Any] = {}
    dists: dict[str, BaseDistribution] = {}
    for name, value in values.items():
        dist = known.get(name)
        if dist is None:
            continue
        if isinstance(dist, CategoricalDistribution):
            matches = [c for c in dist.choices if c == value or str(c) == str(value)]
            if not matches:
                continue
            params[name] = matches[0]
        else:
            number = float(value)
            params[name] = round(number) if isinstance(dist, IntDistribution) else number
        dists[name] = dist
    return params, dists


def _recommended(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    try:
        return recommended_trial(study)
    except AdvisorError:
        return None


def _ran_with(r: TrialResult, name: str, study: optuna.Study) -> int | None:
    """The job's own ``batch_size`` / ``epochs`` as the service reports them; the study's
    recommended trial's when the service does not say."""
    if name in r.static:
        return round(float(r.static[name]))
    base = _recommended(study)
    if base is None:
        return None
    value = base.params.get(name) if name == "batch_size" else base.user_attrs.get(name)
    return int(value) if value is not None else None


__all__: Sequence[str] = ("import_results", "job_cost", "machine_row")
