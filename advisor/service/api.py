"""The service's one adapter to the advisor's Python API.

Everything the service calls in the rest of the advisor goes through this module, so that a
rename there (``advisor.study`` -> ``advisor.suggest``, ``advisor.cli.predict``'s logic ->
``advisor.predict``, tuning jobs -> ``advisor.tuning_jobs``) is re-pointed here only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from advisor.errors import AdvisorError
from advisor.service import db

Progress = Callable[[str, int, int], None]


def uses_local_probes() -> bool:
    """True when suggestions probe this host for real (the default back end): such jobs run
    one at a time per host, because a probe times the CPU."""
    from advisor.study import BACKEND_ENV

    return not os.environ.get(BACKEND_ENV)


def suggest(
    request: dict[str, Any], storage: str, progress: Progress | None = None
) -> dict[str, Any]:
    """Run (or resume) the study for ``request`` in ``storage``; return the report dict
    (the same document ``advisor suggest --json`` prints)."""
    from advisor.report import build_report, check_feasible
    from advisor.search_spaces.loader import load_space
    from advisor.study import SuggestOptions, run_suggest

    req = dict(request)
    space_text = req.pop("space", None)
    model = str(req["model"])
    space = load_space(space_text, None if ":" in model else model) if space_text else None
    options = SuggestOptions(space=space, storage=db.optuna_url(storage), **req)
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


def _optuna_storage(storage: str) -> Any:
    from advisor.study import open_storage

    return open_storage(db.optuna_url(storage))


def redacted(url: str) -> str:
    """The storage URL without its password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1]
