"""Reading a team's studies from the storage: a page of names, one study, trial counts.

A listing costs two queries per page whatever the number of studies in the storage (it reads
Optuna's ``studies``, ``trials`` and ``study_user_attributes`` tables, stable since Optuna 2,
instead of summarising every study); names are ordered, and a page starts after the last name
of the previous one (keyset). Internal studies and other teams' are never listed or read
(``advisor.service.teams``).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import text

from advisor.service import db, teams

FINISHED = ("COMPLETE", "PRUNED", "FAIL")


def _team_filter(team: str) -> tuple[str, dict[str, Any]]:
    internal = sorted(teams.internal_study_names())
    params: dict[str, Any] = {f"internal{i}": n for i, n in enumerate(internal)}
    not_internal = f"lower(s.study_name) NOT IN ({', '.join(':' + k for k in params)})"
    if team == teams.DEFAULT_TEAM:
        return f"s.study_name NOT LIKE '%{teams.SEPARATOR}%' AND {not_internal}", params
    # 'team/' <= name < 'team0': '0' is the character after '/'
    low = f"{team}{teams.SEPARATOR}"
    params.update(low=low, high=f"{team}{chr(ord(teams.SEPARATOR) + 1)}")
    return f"s.study_name >= :low AND s.study_name < :high AND {not_internal}", params


def list_studies(
    storage: str, team: str, limit: int, after: str | None = None
) -> list[dict[str, Any]]:
    """``team``'s studies by name, at most ``limit``, after the name ``after``: name, trial
    count, workload, objective and when the first trial started."""
    where, params = _team_filter(team)
    if after is not None:
        where += " AND s.study_name > :after"
        params["after"] = teams.stored_name(team, after)
    with db.engine_for(storage).connect() as conn:
        page = conn.execute(
            text(
                f"SELECT s.study_id, s.study_name FROM studies s WHERE {where} "
                "ORDER BY s.study_name LIMIT :limit"
            ),
            {**params, "limit": limit},
        ).all()
        if not page:
            return []
        ids = {r.study_id: r.study_name for r in page}
        marks = ", ".join(f":id{i}" for i in range(len(ids)))
        by_id = {f"id{i}": sid for i, sid in enumerate(ids)}
        counts = {
            r.study_id: (r.n, r.started)
            for r in conn.execute(
                text(
                    "SELECT study_id, count(*) AS n, min(datetime_start) AS started FROM trials "
                    f"WHERE study_id IN ({marks}) GROUP BY study_id"
                ),
                by_id,
            )
        }
        attrs: dict[int, dict[str, Any]] = {sid: {} for sid in ids}
        for r in conn.execute(
            text(
                "SELECT study_id, key, value_json FROM study_user_attributes "
                f"WHERE study_id IN ({marks}) AND key IN ('workload', 'objective')"
            ),
            by_id,
        ):
            attrs[r.study_id][r.key] = json.loads(r.value_json)
    out = []
    for sid, stored in ids.items():
        n, started = counts.get(sid, (0, None))
        out.append(
            {
                "name": teams.public_name(team, stored),
                "n_trials": int(n),
                "workload": attrs[sid].get("workload"),
                "objective": attrs[sid].get("objective"),
                "started": _iso(started),
            }
        )
    return out


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def finished_trials(storage: str, stored: str) -> int:
    """How many finished trials the stored study ``stored`` has (0 when it does not exist)."""
    from advisor.service.api import optuna_storage

    optuna_storage(storage)  # Optuna's tables exist (created once per process)
    with db.engine_for(storage).connect() as conn:
        n = conn.execute(
            text(
                "SELECT count(*) FROM trials t JOIN studies s ON s.study_id = t.study_id "
                "WHERE s.study_name = :name AND t.state IN ('COMPLETE', 'PRUNED', 'FAIL')"
            ),
            {"name": stored},
        ).scalar()
    return int(n or 0)


def mark_stopped(storage: str, study: str) -> None:
    """Record that the study's last run stopped on its own after its trials (the mark
    ``run_suggest`` writes at a run's end, ``last_run``), unless it says so already. A job
    whose trials were all written but whose run was killed before that mark then reports
    without adding trials (a re-run of a stopped study adds none)."""
    import optuna

    from advisor.service.api import optuna_storage

    found = optuna.load_study(study_name=study, storage=optuna_storage(storage))
    if not (found.user_attrs.get("last_run") or {}).get("final"):
        found.set_user_attr("last_run", {"stop": "trials", "final": True})


def read_study(storage: str, team: str, name: str) -> dict[str, Any] | None:
    """``team``'s study ``name``: its attributes and trials (params, values, state, user
    attributes), or None when the team has no study by that name."""
    import optuna

    from advisor.service.api import optuna_storage

    stored = teams.stored_name(team, name)
    if teams.public_name(team, stored) != name:
        return None
    try:
        study = optuna.load_study(study_name=stored, storage=optuna_storage(storage))
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
