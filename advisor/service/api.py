"""The service's one adapter to the advisor's Python API.

Everything the service calls in the rest of the advisor goes through this module, so that a
rename there (``advisor.study`` -> ``advisor.suggest``, ``advisor.cli.predict``'s logic ->
``advisor.predict``, tuning jobs -> ``advisor.tuning_jobs``) is re-pointed here only.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from advisor.errors import AdvisorError
from advisor.service import db

Progress = Callable[[str, int, int], None]


def uses_local_probes() -> bool:
    """True when suggestions probe this host for real (the default back end): such jobs run
    one at a time per host, because a probe times the CPU."""
    from advisor.study import BACKEND_ENV

    return not os.environ.get(BACKEND_ENV)


def study_identity(request: dict[str, Any]) -> dict[str, Any]:
    """What names a suggestion's study (as ``advisor.study.study_name_for`` hashes it):
    requests equal here run the same study, so only one may be queued or running."""
    if request.get("study_name"):
        return {"study_name": request["study_name"]}
    objective = request.get("objective") or (
        "time" if request.get("budget_usd") else "cost" if request.get("deadline_s") else "pareto"
    )
    keys = (
        *("model", "framework", "space", "budget_usd", "deadline_s", "epochs", "snapshot"),
        *("probe_iterations", "n_train", "n_val"),
    )
    return {"objective": objective, **{k: request.get(k) for k in keys}}


def _options(request: dict[str, Any], storage: str, seed_offset: int = 0) -> Any:
    from advisor.search_spaces.loader import load_space
    from advisor.study import SuggestOptions

    req = dict(request)
    space_text = req.pop("space", None)
    model = str(req["model"])
    space = load_space(space_text, None if ":" in model else model) if space_text else None
    req["seed"] = int(req.get("seed", 0)) + seed_offset
    return SuggestOptions(space=space, storage=db.optuna_url(storage), **req)


def suggest(
    request: dict[str, Any], storage: str, progress: Progress | None = None
) -> dict[str, Any]:
    """Run (or resume) the study for ``request`` in ``storage``; return the report dict
    (the same document ``advisor suggest --json`` prints)."""
    from advisor.report import build_report, check_feasible
    from advisor.study import run_suggest

    options = _options(request, storage)
    outcome = run_suggest(options, progress=progress)
    check_feasible(outcome)
    report = build_report(outcome)
    report["storage"] = redacted(storage)
    return report


def predict(request: dict[str, Any]) -> dict[str, Any]:
    """Predict time and cost on catalog machines from an uploaded probe (no probe runs on
    the server; the trace refinement of ``advisor predict`` is skipped, so the model's priors
    stand for the host terms, as the response says)."""
    from advisor.probes.perf.report import forecast, normalised_tables
    from advisor.probes.result import ProbeResult
    from advisor.providers import catalog as catalog_mod
    from advisor.search_spaces.workloads import get

    try:
        probe = ProbeResult.from_dict(request["probe"])
    except (TypeError, ValueError, KeyError) as exc:
        raise AdvisorError(
            f"The uploaded probe is not a probe result ({exc}).",
            "send the JSON of `advisor probe --json` as 'probe'.",
        ) from exc
    if not probe.ok:
        raise AdvisorError(f"The uploaded probe failed ({probe.status}).", "send a good probe.")
    workload = get(probe.workload)
    catalog = catalog_mod.load(request.get("snapshot"))
    machines = [
        catalog_mod.local_machine() if n in ("local", "local:local") else catalog.get(n)
        for n in request["instances"]
    ]
    batch = probe.batch_size
    epochs = request.get("epochs") or workload.epochs_for(batch)
    n_train = probe.n_train or workload.n_train
    n_val = probe.n_val if probe.n_train else workload.n_val
    rows = forecast(
        probe, machines, catalog, batch, epochs, n_train, n_val, spot=bool(request.get("spot"))
    )
    tables = normalised_tables(rows)
    return {
        "workload": probe.workload,
        "batch_size": batch,
        "epochs": epochs,
        "snapshot": catalog.snapshot,
        "machines": [f.to_dict() for f in rows],
        "fastest": rows[0].machine.key,
        "normalised": {
            k: {m: {str(c): v for c, v in row.items()} for m, row in t.items()}
            for k, t in tables.items()
        },
        "note": "host terms from the performance model's priors (no step trace on the server)",
    }


def catalog_rows(filters: dict[str, Any]) -> dict[str, Any]:
    """Catalog rows matching ``filters`` (providers, services, accelerators, min/max gpus,
    max_price, spot, snapshot)."""
    from advisor.providers.catalog import load

    cat = load(filters.get("snapshot"))
    rows = cat.filter(
        providers=tuple(filters.get("providers") or ()),
        services=tuple(filters.get("services") or ()),
        accelerators=tuple(filters.get("accelerators") or ()),
        min_gpus=int(filters.get("min_gpus") or 0),
        max_gpus=filters.get("max_gpus"),
        max_price=filters.get("max_price"),
        spot=bool(filters.get("spot")),
    )
    return {"snapshot": cat.snapshot, "rows": [dict(r.to_dict(), key=r.key) for r in rows]}


def list_studies(storage: str) -> list[dict[str, Any]]:
    """Study names with trial counts and the advisor's study attributes."""
    import optuna

    out = []
    for s in optuna.get_all_study_summaries(_optuna_storage(storage), include_best_trial=False):
        out.append(
            {
                "name": s.study_name,
                "n_trials": s.n_trials,
                "workload": s.user_attrs.get("workload"),
                "objective": s.user_attrs.get("objective"),
                "started": s.datetime_start.isoformat() if s.datetime_start else None,
            }
        )
    return out


def read_study(storage: str, name: str) -> dict[str, Any] | None:
    """One study: its attributes and its trials (params, values, state, user attributes)."""
    import optuna

    st = _optuna_storage(storage)
    try:
        study = optuna.load_study(study_name=name, storage=st)
    except KeyError:
        return None
    trials = study.get_trials(deepcopy=False)
    return {
        "name": name,
        "directions": [d.name.lower() for d in study.directions],
        "user_attrs": study.user_attrs,
        "n_trials": len(trials),
        "trials": [
            {
                "number": t.number,
                "state": t.state.name,
                "params": t.params,
                "values": t.values,
                "user_attrs": t.user_attrs,
            }
            for t in trials
        ],
    }


_STORAGES: dict[str, Any] = {}
_STORAGES_LOCK = threading.Lock()


def _optuna_storage(storage: str) -> Any:
    """One Optuna storage per URL per process: creating one checks (and on a new database
    creates) Optuna's schema, which concurrent requests must not race on."""
    from advisor.study import open_storage

    with _STORAGES_LOCK:
        if storage not in _STORAGES:
            _STORAGES[storage] = open_storage(db.optuna_url(storage))
        return _STORAGES[storage]


def prepare_storage(storage: str) -> None:
    """Create Optuna's schema and the service's tables now, before concurrent use."""
    db.engine_for(storage)
    _optuna_storage(storage)


def redacted(url: str) -> str:
    """The storage URL without its password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1]


@dataclass
class StudyParts:
    """What a worker joining a study needs: its name, directions, sampler, and how to
    sample, evaluate, score and record a candidate the way ``advisor suggest`` does."""

    name: str
    options: Any
    objective: str
    workload: Any
    space: Any
    backend: Any
    by_key: dict[str, Any]
    sampler: Any
    directions: list[Any]
    metric_names: list[str]
    study_attrs: dict[str, Any]

    def sample(self, trial: Any) -> tuple[Any, int, dict[str, Any]]:
        """(candidate, batch size, hyperparameters) for ``trial``."""
        from advisor.search_spaces.convert import suggest as sample

        machine, batch, hps = sample(trial, self.space, list(self.by_key))
        return self.by_key[machine], batch, hps

    def runtime_hps(self, hps: dict[str, Any]) -> dict[str, Any]:
        """The hyperparameters that change the run time (part of a probe's key)."""
        names = {p.name for p in self.space.hyperparameters if p.affects_runtime}
        return {k: v for k, v in hps.items() if k in names}

    def evaluate(self, cand: Any, batch: int, hps: dict[str, Any]) -> Any:
        """Score the candidate with the back end (may run a probe)."""
        return self.backend.evaluate(self.workload, cand, batch, hps)

    def values(self, ev: Any, trial: Any) -> list[float]:
        """Objective values; budget/deadline set as Optuna constraints and ``feasible``."""
        o = self.options
        constraints = {}
        if o.budget_usd is not None:
            constraints["budget"] = ev.cost.value - o.budget_usd
        if o.deadline_s is not None:
            constraints["deadline"] = ev.runtime.value - o.deadline_s
        for k, v in constraints.items():
            trial.set_constraint(k, v)
        trial.set_user_attr("feasible", all(v <= 0 for v in constraints.values()))
        if self.objective == "time":
            return [ev.runtime.value]
        if self.objective == "cost":
            return [ev.cost.value]
        return [ev.runtime.value, ev.cost.value]


def study_parts(request: dict[str, Any], storage: str, seed_offset: int = 0) -> StudyParts:
    """Resolve ``request`` as ``advisor suggest`` would, for a worker joining its study."""
    from optuna.study import StudyDirection

    from advisor.samplers import make_sampler
    from advisor.search_spaces.loader import default_space
    from advisor.search_spaces.space import space_to_dict
    from advisor.study import (
        METRIC_NAMES,
        default_backend,
        resolve_storage,
        study_name_for,
        workload_info,
    )

    options = _options(request, storage, seed_offset)
    workload = workload_info(options)
    space = options.space or default_space(workload.name)
    backend = default_backend(options, resolve_storage(options.storage), space)
    objective = options.resolved_objective
    return StudyParts(
        name=study_name_for(options, workload, space, backend.snapshot),
        options=options,
        objective=objective,
        workload=workload,
        space=space,
        backend=backend,
        by_key={c.key: c for c in backend.candidates(space)},
        sampler=make_sampler(options.sampler, options.seed),
        directions=[StudyDirection.MINIMIZE] * (2 if objective == "pareto" else 1),
        metric_names=list(METRIC_NAMES[objective]),
        study_attrs={
            "workload": workload.name,
            "framework": workload.framework,
            "space": space_to_dict(space),
            "catalog_snapshot": backend.snapshot,
            "budget_usd": options.budget_usd,
            "deadline_s": options.deadline_s,
            "objective": objective,
            "epochs": options.epochs,
            "n_train": workload.n_train,
            "n_val": workload.n_val,
            "backend": backend.name,
        },
    )


def record_trial(trial: Any, ev: Any, charged: float, parts: StudyParts, cand: Any) -> None:
    """The trial's attributes, as ``advisor suggest`` records them (so it can resume)."""
    attrs: dict[str, Any] = {
        "source": ev.source,
        "price_per_hour": ev.price_per_hour,
        "spot": ev.spot,
        "instance": dict(cand.instance.to_dict(), catalog_snapshot=parts.backend.snapshot),
        "epochs": ev.epochs,
        "probe_cost": {"seconds": ev.probe_s, "charged_usd": charged},
        "estimate": ev.estimate,
        "phases": ev.phases.to_dict() if ev.phases else None,
        "probe": ev.probe.to_dict() if ev.probe else None,
        "runtime_s": ev.runtime.to_dict() if ev.runtime else None,
        "cost_usd": ev.cost.to_dict() if ev.cost else None,
    }
    for k, v in attrs.items():
        trial.set_user_attr(k, v)


def evaluation_to_dict(ev: Any, trial_number: int) -> dict[str, Any]:
    """An Evaluation as JSON-ready data (a probe claim's result)."""
    return {
        "trial": trial_number,
        "machine": ev.machine,
        "batch_size": ev.batch_size,
        "status": ev.status,
        "runtime": ev.runtime.to_dict() if ev.runtime else None,
        "cost": ev.cost.to_dict() if ev.cost else None,
        "source": ev.source,
        "epochs": ev.epochs,
        "price_per_hour": ev.price_per_hour,
        "spot": ev.spot,
        "probe_s": ev.probe_s,
        "estimate": ev.estimate,
        "phases": ev.phases.to_dict() if ev.phases else None,
        "error": ev.error,
    }


def evaluation_from_dict(d: dict[str, Any]) -> Any:
    """The Evaluation of ``evaluation_to_dict`` (the probe itself stays with its trial)."""
    from advisor.probes.result import Interval
    from advisor.scoring import Evaluation, phases_from_dict

    def iv(x: dict[str, float] | None) -> Interval | None:
        return None if x is None else Interval(x["value"], x["low"], x["high"])

    return Evaluation(
        machine=d["machine"],
        batch_size=int(d["batch_size"]),
        status=d["status"],
        runtime=iv(d["runtime"]),
        cost=iv(d["cost"]),
        source=d["source"],
        epochs=int(d["epochs"]),
        price_per_hour=float(d["price_per_hour"]),
        spot=bool(d["spot"]),
        probe_s=float(d["probe_s"]),
        estimate=dict(d["estimate"] or {}),
        phases=phases_from_dict(d["phases"]) if d["phases"] else None,
        error=d["error"],
    )
