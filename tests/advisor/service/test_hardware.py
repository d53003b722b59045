"""Issue #37: machines a team owns, kept per team in the service's database (TestClient,
SQLite and a real PostgreSQL, replay back end): added, listed and removed through the HTTP API, candidates of that
team's suggestion jobs and of no other team's; the workers' own hardware.json is not read."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from advisor.providers.owned import OwnedMachine, save_owned
from fastapi.testclient import TestClient

from advisor.evaluation.replay import ReplayEntry, ReplayTable
from advisor.intervals import Interval
from advisor.service import auth
from advisor.service.app import Settings, create_app
from advisor.service.dispatch import ThreadDispatcher

RIG = {"name": "rig", "gpus": "8xRTX4090", "purchase_usd": 20000, "lifetime": "3y",
       "power_w": 3600, "usd_per_kwh": 0.3}  # fmt: skip
BODY = {"model": "fcn", "budget_usd": 50, "trials": 4}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def storage(request: pytest.FixtureRequest) -> str:
    """The service's database: SQLite, and a real PostgreSQL (``pg_url``)."""
    url: str = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    return url


@pytest.fixture
def client(storage: str, replay: str, tmp_path: Path) -> Iterator[Any]:
    """The service tests' replay table plus times for ``owned:rig`` and ``owned:home-rig``
    (faster than every rented run: a rig that is a candidate is recommended); the worker's
    ADVISOR_HOME holds ``home-rig``, which no team added."""
    base = ReplayTable.load(replay.partition(":")[2])
    owned = tuple(
        ReplayEntry(f"owned:{name}", b, Interval(100.0, 95.0, 105.0),
                    predicted=Interval(110.0, 80.0, 140.0), probe_s=30.0)
        for name in ("rig", "home-rig") for b in (256, 512)
    )  # fmt: skip
    path = tmp_path / "owned-table.json"
    ReplayTable(base.instances, (*base.entries, *owned), base.snapshot, epochs=10).save(path)
    save_owned([OwnedMachine("home-rig", "V100", 8, 1000.0, 8766.0, 3000.0, 0.3)])
    dispatcher = ThreadDispatcher(storage, threads=2, backend=f"replay:{path}")
    with TestClient(create_app(Settings(storage, dispatcher))) as c:
        yield c
    dispatcher.close()


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _report(client: Any, token: str, body: dict[str, Any]) -> dict[str, Any]:
    job_id = client.post("/v1/suggestions", json=body, headers=_h(token)).json()["id"]
    end = time.monotonic() + 60
    while time.monotonic() < end:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}", headers=_h(token)).json()
        if job["status"] in ("done", "failed"):
            assert job["status"] == "done", job["error"]
            return dict(job["result"])
        time.sleep(0.1)
    raise TimeoutError(job_id)


def _machines(report: dict[str, Any]) -> set[str]:
    return {r["machine"] for r in report["ranking"]}


@pytest.mark.slow  # three suggestion jobs through the service (about 5 s)
def test_a_teams_machines_are_candidates_of_its_jobs_only(client: Any, storage: str) -> None:
    alice = auth.create_token(storage, "alice", "research")
    bob = auth.create_token(storage, "bob", "ops")
    added = client.post("/v1/hardware", json=RIG, headers=_h(alice))
    assert added.status_code == 201, added.text
    rig = added.json()
    assert rig["key"] == "owned:rig" and (rig["board"], rig["count"]) == ("RTX4090", 8)
    assert "USD 20,000" in rig["formula"] and "3.6 kW" in rig["formula"]
    assert [m["name"] for m in client.get("/v1/hardware", headers=_h(alice)).json()] == ["rig"]
    assert client.get("/v1/hardware", headers=_h(bob)).json() == []
    assert client.delete("/v1/hardware/rig", headers=_h(bob)).status_code == 404

    mine, theirs = _report(client, alice, BODY), _report(client, bob, BODY)
    assert "owned:rig" in _machines(mine) and mine["recommended"]["machine"] == "owned:rig"
    own = next(r for r in mine["ranking"] if r["machine"] == "owned:rig")
    assert own["price_basis"] == "owned"
    assert own["price_per_hour"] == pytest.approx(rig["usd_per_hour"])
    assert [e["machine"] for e in mine["owned"]] == ["owned:rig"]
    assert not {m for m in _machines(theirs) if m.startswith("owned:")}  # not bob's, nor home's
    assert "owned:home-rig" not in _machines(mine)
    assert mine["study"] != theirs["study"]  # the rig makes Alice's question another one

    assert client.delete("/v1/hardware/rig", headers=_h(alice)).status_code == 204
    assert client.get("/v1/hardware", headers=_h(alice)).json() == []
    again = _report(client, alice, BODY)
    assert not {m for m in _machines(again) if m.startswith("owned:")}
    assert again["study"] == theirs["study"]  # the same question as a team owning nothing


def test_bad_machines_are_refused_in_one_line(client: Any, storage: str) -> None:
    alice = auth.create_token(storage, "alice", "research")
    unknown = client.post("/v1/hardware", json={**RIG, "gpus": "4xRTX2070"}, headers=_h(alice))
    assert unknown.status_code == 400
    assert "RTX2070" in unknown.text and "RTX4090" in unknown.text
    lifetime = client.post("/v1/hardware", json={**RIG, "lifetime": "3 years"}, headers=_h(alice))
    assert lifetime.status_code == 400 and "--lifetime" in lifetime.text
    extra = client.post("/v1/hardware", json={**RIG, "colour": "red"}, headers=_h(alice))
    assert extra.status_code == 422
    assert client.get("/v1/hardware", headers=_h(alice)).json() == []


@pytest.mark.parametrize(
    ("change", "status", "field", "words"),
    [
        ({"gpus": "1000000000xH100"}, 400, None, "count of COUNTxBOARD must be an integer"),
        ({"gpus": "9" * 40 + "xH100"}, 400, None, "from 1 to 16"),  # 64 characters at most
        ({"gpus": "0xRTX4090"}, 400, None, "from 1 to 16"),
        ({"purchase_usd": 0}, 422, "purchase_usd", "greater than 0"),
        ({"power_w": 500_000}, 422, "power_w", "less than or equal to 100000"),
        ({"utilisation": 1e-300}, 422, "utilisation", "greater than or equal to 0.01"),
        ({"lifetime": "1000000y"}, 400, None, "--lifetime for 'rig' must be a number from 1"),
        ({"vcpus": 100_000}, 422, "vcpus", "less than or equal to 4096"),
    ],
)
def test_machines_no_one_owns_are_refused(
    client: Any, storage: str, change: dict[str, Any], status: int, field: str | None, words: str
) -> None:
    """Issue #50: the service's bounds are the CLI's and hardware.json's (one table,
    ``advisor.providers.owned_checks``); before, a billion H100s was accepted at the price
    and power of four and a 400-digit count was a 500."""
    alice = auth.create_token(storage, "alice", "research")
    r = client.post("/v1/hardware", json={**RIG, **change}, headers=_h(alice))
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    text = detail if field is None else {d["field"]: d["problem"] for d in detail}.get(field, "")
    assert words in text, detail
    assert client.get("/v1/hardware", headers=_h(alice)).json() == []


@pytest.mark.parametrize(
    ("machine", "words"),
    [
        ({"count": "four"}, "count must be an integer from 1 to 16"),
        ({"count": 0}, "count must be an integer from 1 to 16"),
        ({"count": 10**400}, "but got a 401-digit integer"),
        ({"purchase_usd": 0.0, "power_w": 0.0}, "purchase_usd must be a number above 0"),
        ({"colour": "red"}, "unknown field(s) colour"),
    ],
)
def test_a_damaged_machine_in_the_database_is_one_line(
    client: Any, storage: str, machine: dict[str, Any], words: str
) -> None:
    """A team's machine row the service did not write (edited by hand, an older version) is
    read by the same reader as hardware.json: one line naming the machine, the field and the
    fix, for the listing and for a suggestion of that team -- never a 500, never a run on
    "0 x RTX4090"."""
    import json

    from advisor.service import db

    alice = auth.create_token(storage, "alice", "research")
    assert client.post("/v1/hardware", json=RIG, headers=_h(alice)).status_code == 201
    stored = {"name": "rig", "board": "RTX4090", "count": 8, "purchase_usd": 20000.0,
              "lifetime_h": 26298.0, "power_w": 3600.0, "usd_per_kwh": 0.3, **machine}  # fmt: skip
    with db.engine_for(storage).begin() as conn:
        conn.execute(db.owned_machines.update().values(machine=json.dumps(stored)))
    for r in (
        client.get("/v1/hardware", headers=_h(alice)),
        client.post("/v1/suggestions", json=BODY, headers=_h(alice)),
    ):
        assert r.status_code == 400, r.text
        line = r.json()["detail"]
        assert "team 'research'" in line and words in line and "DELETE /v1/hardware" in line
    assert client.delete("/v1/hardware/rig", headers=_h(alice)).status_code == 204  # the fix


@pytest.mark.slow  # a real `advisor serve` process
def test_the_cli_keeps_a_teams_machines_on_the_service(
    sqlite_url: str, replay: str, make_server: Any, _advisor_home: Path
) -> None:
    """``advisor hardware add|list|remove --server URL``: the token's team's machines, kept in
    the service's database; nothing is written to the local hardware.json."""
    from cli_run import run

    srv = make_server(sqlite_url, "--backend", replay)
    token = auth.create_token(sqlite_url, "alice", "research")
    on = ("--server", srv.url, "--token", token)
    args = ["--gpus", "4xRTX4090", "--purchase-usd", "9000", "--lifetime", "3y",
            "--power-w", "1800", "--usd-per-kwh", "0.30"]  # fmt: skip
    added = run("hardware", "add", "rig", *args, *on)
    assert added.code == 0, added
    assert "owned:rig: 4 x RTX4090; owned: USD 9,000 / (3 y" in added.out
    listed = run("hardware", "list", *on)
    assert listed.code == 0 and "owned:rig: 4 x RTX4090" in listed.out
    other = auth.create_token(sqlite_url, "bob", "ops")
    theirs = run("hardware", "list", "--server", srv.url, "--token", other)
    assert "owns no machines" in theirs.out
    gone = run("hardware", "remove", "rig", "--server", srv.url, "--token", other)
    lines = [x for x in gone.err.splitlines() if x.strip()]
    assert gone.code != 0 and len(lines) == 1 and "no machine 'rig'" in lines[0]
    assert not (_advisor_home / "hardware.json").exists()
    assert run("hardware", "remove", "rig", *on).code == 0
    assert "owns no machines" in run("hardware", "list", *on).out
    bad = run("hardware", "add", "old", "--gpus", "2xRTX2070", *args[2:], *on)
    assert bad.code != 0 and "RTX2070" in bad.err and "RTX4090" in bad.err
