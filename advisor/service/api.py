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
from typing import Any

from advisor.search_spaces.workloads import ModelRef
from advisor.service import db

Progress = Callable[[str, int, int], None]


def probe_slot_listener(listener: Callable[[bool], None]) -> Any:
    """``advisor.evaluation.probe_slot.on_wait``: ``listener`` hears when this thread waits
    for one of the host's probe locks (a probe times the CPU: one at a time per host; one
    probe per configuration)."""
    from advisor.evaluation.probe_slot import on_wait

    return on_wait(listener)


def retrying_writes(policy: Callable[[Callable[[], Any]], Any]) -> Any:
    """``advisor.storage.transient.retrying``: this thread's probe and trial writes go
    through ``policy`` (a job retries them through a short storage outage)."""
    from advisor.storage.transient import retrying

    return retrying(policy)


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
    from advisor.prediction.timing.ledger import LEDGER_STUDY
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
    on_first_answer: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run (or resume) the study for ``request`` in ``storage``; return the report dict
    (the same document ``advisor suggest --json`` prints). ``on_first_answer`` hears the
    first answer, as the pipeline gives one (issue #36)."""
    from advisor.pipeline import suggest as run_pipeline

    options = _options(request, storage)
    report = run_pipeline(
        options, backend=_backend(backend), progress=progress, on_first_answer=on_first_answer
    )
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


def join_study(
    request: dict[str, Any],
    storage: str,
    claims: Callable[[Any, Any], Any],
    progress: Progress | None = None,
    seed_offset: int = 0,
    backend: str | None = None,
) -> Any:
    """Run (or resume) ``request``'s study in ``storage`` as ``advisor suggest`` does
    (``advisor.study.run.run_suggest``: the same set-up and trial loop), with the claims
    store ``claims(optuna_storage, study)`` injected (workers on several hosts); the
    ``SuggestOutcome``."""
    from advisor.study.run import run_suggest

    options = _options(request, storage, seed_offset)
    return run_suggest(options, _backend(backend), progress=progress, claims=claims)
