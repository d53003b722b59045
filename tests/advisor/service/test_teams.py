"""Teams (issue #30), in process (TestClient, SQLite, replay back end): a team sees and writes
only its own jobs and studies, internal studies are nobody's, tokens from before teams are the
default team's; listings are pages; out-of-range seeds are 422."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from fastapi.testclient import TestClient

from advisor.service import auth, db
from advisor.service.app import Settings, create_app
from advisor.service.dispatch import ThreadDispatcher

INTERNAL = ["advisor-probe-cache", "ADVISOR-Probe-Cache", "advisor-remote-probes"]
INTERNAL += ["advisor-calibration-ledger"]


@pytest.fixture
def client(sqlite_url: str, replay: str) -> Iterator[Any]:
    dispatcher = ThreadDispatcher(sqlite_url, threads=2, backend=replay)
    with TestClient(create_app(Settings(sqlite_url, dispatcher))) as c:
        yield c
    dispatcher.close()


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _done(client: Any, token: str, job_id: str) -> dict[str, Any]:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}", headers=_h(token)).json()
        if job["status"] in ("done", "failed"):
            assert job["status"] == "done", job["error"]
            return job
        time.sleep(0.1)
    raise TimeoutError(job_id)


def _legacy_token(url: str, name: str) -> str:
    """A token as stored before teams existed (no team)."""
    token = auth.PREFIX + name + "x" * 40
    with db.engine_for(url).begin() as conn:
        conn.execute(
            db.tokens.insert().values(
                name=name, hash=auth.token_hash(token), created=datetime.now(timezone.utc)
            )
        )
    return token


def test_a_team_sees_and_writes_only_its_own_jobs_and_studies(client: Any, sqlite_url: str) -> None:
    alice = auth.create_token(sqlite_url, "alice", "research")
    bob = auth.create_token(sqlite_url, "bob", "ops")
    body = {"model": "fcn", "budget_usd": 50, "trials": 3, "screen": False}
    first = client.post("/v1/suggestions", json=body, headers=_h(alice)).json()
    job = _done(client, alice, first["id"])
    study = job["result"]["study"]
    assert "/" not in study  # the team's own name for it
    one = client.get(f"/v1/studies/{study}", headers=_h(alice)).json()
    assert one["name"] == study and one["n_trials"] == 3
    # Bob's team: 404 on Alice's job and study, none listed, no retry of her job.
    assert client.get(f"/v1/jobs/{first['id']}", headers=_h(bob)).status_code == 404
    assert client.get(f"/v1/studies/{study}", headers=_h(bob)).status_code == 404
    assert client.post(f"/v1/jobs/{first['id']}/retry", headers=_h(bob)).status_code == 404
    assert client.get("/v1/studies", headers=_h(bob)).json() == []
    assert client.get("/v1/jobs", headers=_h(bob)).json() == []
    # The same request, and one naming her study, run in Bob's own studies.
    same = client.post("/v1/suggestions", json=body, headers=_h(bob)).json()
    assert same["created"] and same["id"] != first["id"]
    assert _done(client, bob, same["id"])["result"]["study"] == study
    named = {**body, "study_name": study, "budget_usd": 40}
    into = client.post("/v1/suggestions", json=named, headers=_h(bob)).json()
    assert _done(client, bob, into["id"])["result"]["study"] == study
    assert client.get(f"/v1/studies/{study}", headers=_h(alice)).json()["n_trials"] == 3
    assert client.get(f"/v1/studies/{study}", headers=_h(bob)).json()["n_trials"] == 6
    assert [s["name"] for s in client.get("/v1/studies", headers=_h(alice)).json()] == [study]
    assert [j["id"] for j in client.get("/v1/jobs", headers=_h(alice)).json()] == [first["id"]]


def test_tokens_from_before_teams_are_the_default_teams(client: Any, sqlite_url: str) -> None:
    old = _legacy_token(sqlite_url, "legacy")
    assert auth.verify(sqlite_url, old) == auth.Caller("legacy", "default")
    default = auth.create_token(sqlite_url, "carol")  # no --team: the default team
    other = auth.create_token(sqlite_url, "dave", "ops")
    body = {"model": "fcn", "budget_usd": 50, "trials": 2, "screen": False}
    job = _done(
        client, old, client.post("/v1/suggestions", json=body, headers=_h(old)).json()["id"]
    )
    study = job["result"]["study"]
    assert client.get(f"/v1/jobs/{job['id']}", headers=_h(default)).status_code == 200
    assert client.get(f"/v1/studies/{study}", headers=_h(default)).status_code == 200
    assert client.get(f"/v1/studies/{study}", headers=_h(other)).status_code == 404


@pytest.mark.parametrize("name", INTERNAL)
def test_internal_studies_are_refused_everywhere(client: Any, sqlite_url: str, name: str) -> None:
    import optuna

    from advisor.service import api

    token = auth.create_token(sqlite_url, "alice")
    optuna.create_study(study_name=name, storage=api.optuna_storage(sqlite_url))
    body = {"model": "fcn", "study_name": name}
    r = client.post("/v1/suggestions", json=body, headers=_h(token))
    assert r.status_code == 422 and "internal" in r.text, r.text
    assert client.get(f"/v1/studies/{name}", headers=_h(token)).status_code == 422
    assert client.get("/v1/studies", headers=_h(token)).json() == []  # never listed
    target = {"provider": "sagemaker", "study": name}
    assert client.post("/v1/tuning/plan", json=target, headers=_h(token)).status_code == 422


def test_listings_are_pages_with_a_link_to_the_next(client: Any, sqlite_url: str) -> None:
    import optuna

    from advisor.service import api

    token = auth.create_token(sqlite_url, "alice")
    names = [f"s{i}" for i in range(5)]
    for name in names:
        optuna.create_study(study_name=name, storage=api.optuna_storage(sqlite_url))
    seen: list[str] = []
    url: str | None = "/v1/studies?limit=2"
    while url:
        r = client.get(url, headers=_h(token))
        seen += [s["name"] for s in r.json()]
        link = r.headers.get("link")
        url = link.split(";")[0].strip("<>") if link else None
    assert seen == names
    assert client.get("/v1/studies?limit=0", headers=_h(token)).status_code == 422
    assert client.get("/v1/studies?limit=501", headers=_h(token)).status_code == 422


@pytest.mark.parametrize("seed", [-5, 1e26, 2**32])
def test_a_seed_out_of_range_is_422(client: Any, sqlite_url: str, seed: float) -> None:
    token = auth.create_token(sqlite_url, "alice")
    r = client.post("/v1/suggestions", json={"model": "fcn", "seed": seed}, headers=_h(token))
    assert r.status_code == 422, r.text
    assert [d["field"] for d in r.json()["detail"]] == ["seed"]
