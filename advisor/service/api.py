"""The service's one adapter to the advisor's Python API.

Everything the service calls in the rest of the advisor goes through this module
(``advisor.options``, ``advisor.pipeline``, ``advisor.storage.urls``, ``advisor.study.run``,
``advisor.records``, ``advisor.evaluation.predict_api``, ``advisor.tuning.jobs``), so that a
rename there is re-pointed here only. Reading studies for the API is
``advisor.service.studies`` (Optuna's tables, by team).

The scoring back end is a parameter, as ``run_suggest``'s: ``None`` is the real one (local
probes); tests and benchmarks pass ``replay:TABLE.json`` (``advisor.evaluation.replay.backend_from_spec``)
through the hidden ``--backend`` option of ``advisor serve`` / ``advisor worker``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from advisor.search_spaces.workloads import ModelRef
from advisor.service import db

Progress = Callable[[str, int, int], None]


def uses_local_probes(backend: str | None) -> bool:
    """True when suggestions probe this host for real (the default back end): such jobs run
    one at a time per host, because a probe times the CPU."""
    return not backend


def resolve_storage(url: str | None) -> str:
    """``advisor.storage.urls.resolve_storage``: the default SQLite file, or ``url`` checked and
    mapped to its driver."""
    from advisor.storage.urls import resolve_storage as resolve

    return resolve(url)


def _backend(spec: str | None) -> Any:
    """The back end of ``spec`` (``replay:PATH.json``), or None for the real one."""
    from advisor.evaluation.replay import backend_from_spec

    return backend_from_spec(spec) if spec else None


def resolved_study(request: dict[str, Any], backend: str | None = None) -> str:
    """The study ``suggest(request)`` runs in: its ``study_name``, or ``study_name_for``'s
    name with the snapshot resolved as the back end does (the replay table's, the catalog's)."""
    from advisor.options import workload_info
    from advisor.providers import catalog
    from advisor.search_spaces.loader import default_space
    from advisor.study.naming import study_name_for

    options = _options(request, None)
    if options.study_name:
        return str(options.study_name)
    workload = workload_info(options)
    space = options.space or default_space(workload.name)
    scorer = _backend(backend)
    snapshot = scorer.snapshot if scorer is not None else catalog.load(options.snapshot).snapshot
    return study_name_for(options, workload, space, str(snapshot))


def internal_studies() -> tuple[str, ...]:
    """The studies the advisor keeps for itself in a storage: the local and remote probe
    caches and the calibration ledger."""
    from advisor.evaluation.local import PROBE_CACHE_STUDY
    from advisor.prediction.perf.ledger import LEDGER_STUDY
    from advisor.remote.cache import REMOTE_PROBE_STUDY

    return PROBE_CACHE_STUDY, REMOTE_PROBE_STUDY, LEDGER_STUDY


def study_identity(request: dict[str, Any]) -> dict[str, Any]:
    """What names a suggestion's study: the name ``advisor.study.naming.study_name_for`` gives it
    (the same function, so the two cannot drift). Requests equal here run the same study, so
    only one may be queued or running. Resolving it also checks the request (workload, space)
    before anything is queued."""
    from advisor.options import workload_info
    from advisor.search_spaces.filters import machine_filter
    from advisor.search_spaces.loader import default_space
    from advisor.study.naming import study_name_for

    options = _options(request, None)
    if options.study_name:
        return {"study": options.study_name}
    workload = workload_info(options)
    space = machine_filter(options, options.space or default_space(workload.name))  # #28
    # The requested snapshot (not yet resolved to a dated one: that needs the back end).
    return {"study": study_name_for(options, workload, space, options.snapshot or "")}


def _options(request: dict[str, Any], storage: str | None, seed_offset: int = 0) -> Any:
    from advisor.options import SuggestOptions
    from advisor.search_spaces.loader import load_space

    req = dict(request)
    space_text = req.pop("space", None)
    model = str(req["model"])
    space = (
        load_space(space_text, None if ModelRef(model).is_user else model) if space_text else None
    )
    req["seed"] = int(req.get("seed", 0)) + seed_offset
    url = db.optuna_url(storage) if storage else None
    return SuggestOptions(space=space, storage=url, **req)


def suggest(
    request: dict[str, Any],
    storage: str,
    progress: Progress | None = None,
    backend: str | None = None,
) -> dict[str, Any]:
    """Run (or resume) the study for ``request`` in ``storage``; return the report dict
    (the same document ``advisor suggest --json`` prints)."""
    from advisor.pipeline import suggest as run_pipeline

    options = _options(request, storage)
    report = run_pipeline(options, backend=_backend(backend), progress=progress)
    report["storage"] = redacted(storage)
    return report


def predict(request: dict[str, Any]) -> dict[str, Any]:
    """Predict time and cost on catalog machines (catalog keys or the providers' own names)
    from an uploaded probe, with ``advisor.predict`` -- the one prediction path of ``advisor
    predict`` and ``advisor suggest``. No probe runs on the server: a probe without its
    operator trace is traced here on the meta device (a built-in workload; a user model the
    server cannot import keeps a FLOP roofline for its GPU rows, as the response's notes say)."""
    from advisor.evaluation.predict_api import predict as advisor_predict
    from advisor.evaluation.probe_source import probe_from_data

    probe = probe_from_data(
        request.get("probe"), "The uploaded probe", "send the JSON of `advisor probe --json`."
    )
    said: list[str] = []
    prediction = advisor_predict(
        probe.workload,
        probe.batch_size,
        request["instances"],
        snapshot=request.get("snapshot"),
        epochs=request.get("epochs"),
        spot=bool(request.get("spot")),
        probe=probe,
        framework=probe.framework,
        meta_only=True,
        note=said.append,
    )
    out = prediction.to_dict()
    out.pop("probe", None)  # the caller's own upload
    if said:
        out["note"] = " ".join(said)
    return out


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


_STORAGES: dict[str, Any] = {}
_STORAGES_LOCK = threading.Lock()


def optuna_storage(storage: str) -> Any:
    """One Optuna storage per URL per process (creating one checks or creates the schema,
    which concurrent requests must not race on); pooled connections are tested before use
    (a restarted PostgreSQL leaves dead ones), and dropped in forked children."""
    import optuna

    from advisor.storage.urls import open_storage

    with _STORAGES_LOCK:
        if storage not in _STORAGES:
            url = db.optuna_url(storage)
            open_storage(url)  # creates (or checks) the schema under the storage lock
            kwargs = {"pool_pre_ping": True} if db.is_postgres(url) else None
            rdb = optuna.storages.RDBStorage(url, engine_kwargs=kwargs, skip_table_creation=True)
            db.track_engine(rdb.engine)
            _STORAGES[storage] = optuna.storages.get_storage(rdb)
        return _STORAGES[storage]


def prepare_storage(storage: str) -> None:
    """Create Optuna's schema and the service's tables now, before concurrent use."""
    db.engine_for(storage)
    optuna_storage(storage)


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
        """Objective values; budget/deadline set as Optuna constraints (``advisor.options``)."""
        from advisor.options import constraints, objective_values

        for k, v in constraints(self.options, ev).items():
            trial.set_constraint(k, v)
        return objective_values(self.objective, ev)


def study_parts(
    request: dict[str, Any], storage: str, seed_offset: int = 0, backend: str | None = None
) -> StudyParts:
    """Resolve ``request`` as ``advisor suggest`` would, for a worker joining its study."""
    from optuna.study import StudyDirection

    from advisor.options import METRIC_NAMES, workload_info
    from advisor.search_spaces.filters import machine_filter
    from advisor.search_spaces.loader import default_space
    from advisor.storage.urls import resolve_storage
    from advisor.study.naming import study_name_for
    from advisor.study.run import local_backend, study_attrs
    from advisor.study.samplers import make_sampler

    options = _options(request, storage, seed_offset)
    workload = workload_info(options)
    space = machine_filter(options, options.space or default_space(workload.name))  # #28
    scorer = _backend(backend) or local_backend(options, resolve_storage(options.storage), space)
    objective = options.resolved_objective
    return StudyParts(
        name=study_name_for(options, workload, space, scorer.snapshot),
        options=options,
        objective=objective,
        workload=workload,
        space=space,
        backend=scorer,
        by_key={c.key: c for c in scorer.candidates(space, options.include_previous_generation)},
        sampler=make_sampler(options.sampler, options.seed),
        directions=[StudyDirection.MINIMIZE] * (2 if objective == "pareto" else 1),
        metric_names=list(METRIC_NAMES[objective]),
        study_attrs=study_attrs(options, workload, space, scorer),
    )


def record_trial(trial: Any, ev: Any, charged: float, parts: StudyParts, cand: Any) -> None:
    """The trial's attributes through ``advisor.records.TrialRecord``, as ``advisor suggest``
    writes them (so a later suggestion resumes from them and reports)."""
    from advisor.options import is_feasible
    from advisor.records import TrialRecord

    record = TrialRecord.from_evaluation(
        ev,
        instance=dict(cand.instance.to_dict(), catalog_snapshot=parts.backend.snapshot),
        charged_usd=charged,
        feasible=is_feasible(parts.options, ev) if ev.ok else None,
    )
    for k, v in record.to_attrs().items():
        trial.set_user_attr(k, v)


def evaluation_to_dict(ev: Any, trial_number: int) -> dict[str, Any]:
    """An Evaluation as JSON-ready data (a probe claim's result), in the trial record's own
    format (``advisor.records``); the probe itself stays with its trial."""
    from advisor.records import PROBE, TrialRecord

    attrs = TrialRecord.from_evaluation(ev, instance=None, charged_usd=0.0).to_attrs()
    attrs.pop(PROBE, None)
    return {"trial": trial_number, "machine": ev.machine, "batch_size": ev.batch_size, **attrs}


def evaluation_from_dict(d: dict[str, Any]) -> Any:
    """The Evaluation of ``evaluation_to_dict``."""
    from advisor.records import TrialRecord

    return TrialRecord.from_attrs(d["machine"], int(d["batch_size"]), d).to_evaluation()
