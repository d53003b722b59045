"""The HTTP API in process (FastAPI's TestClient, real SQLite storage, replay back end):
auth, validation, size limits, a suggestion end to end, studies, catalog, predict."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from advisor.service import auth
from advisor.service.app import Settings, create_app
from advisor.service.dispatch import ThreadDispatcher


@pytest.fixture
def client(sqlite_url: str, replay: str) -> Any:
    dispatcher = ThreadDispatcher(sqlite_url, threads=2, backend=replay)
    app = create_app(Settings(sqlite_url, dispatcher, max_body_bytes=20_000))
    with TestClient(app) as c:
        c.storage = sqlite_url  # type: ignore[attr-defined]
        yield c
    dispatcher.close()


@pytest.fixture
def token(sqlite_url: str) -> str:
    return auth.create_token(sqlite_url, "alice")


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def wait_job(client: Any, job_id: str, token: str, timeout: float = 60) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}", headers=_h(token)).json()
        if job["status"] in ("done", "failed"):
            return job
        time.sleep(0.1)
    raise TimeoutError(job_id)


def test_health_needs_no_token_and_openapi_is_served(client: Any) -> None:
    assert client.get("/health").json()["status"] == "ok"
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/suggestions", "/v1/jobs/{job_id}", "/v1/studies", "/v1/predict"} <= set(paths)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer adv_wrong"},
        {"Authorization": "Basic YWxpY2U6eA=="},
        {"Authorization": "Bearer "},
    ],
)
def test_every_endpoint_refuses_a_missing_or_wrong_token(
    client: Any, token: str, headers: dict[str, str]
) -> None:
    for method, path in [
        ("get", "/v1/studies"),
        ("get", "/v1/studies/x"),
        ("get", "/v1/jobs/" + "0" * 32),
        ("get", "/v1/catalog"),
        ("post", "/v1/suggestions"),
        ("post", "/v1/predict"),
    ]:
        r = getattr(client, method)(path, headers=headers)
        assert r.status_code == 401, (method, path, r.text)
        assert r.headers["www-authenticate"] == "Bearer"


def test_revoked_token_is_refused(client: Any, token: str, sqlite_url: str) -> None:
    assert client.get("/v1/studies", headers=_h(token)).status_code == 200
    auth.revoke_token(sqlite_url, "alice")
    assert client.get("/v1/studies", headers=_h(token)).status_code == 401


def test_tokens_are_stored_hashed(token: str, sqlite_url: str) -> None:
    import sqlite3

    raw = Path(sqlite_url.removeprefix("sqlite:///")).read_bytes()
    assert token.encode() not in raw
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
        (stored,) = conn.execute("SELECT hash FROM advisor_tokens").fetchone()
    assert stored == auth.token_hash(token) and len(stored) == 64


def test_suggestion_runs_as_a_job_and_returns_the_report(client: Any, token: str) -> None:
    r = client.post("/v1/suggestions", json={"model": "fcn", "budget_usd": 50}, headers=_h(token))
    assert r.status_code == 202, r.text
    job = wait_job(client, r.json()["id"], token)
    assert job["status"] == "done", job["error"]
    report = job["result"]
    # The replay table's fastest machine within USD 50 is p3.16xlarge at batch 512 (300 s).
    assert report["recommended"]["machine"].startswith("ec2:p3.16xlarge")
    assert report["recommended"]["batch_size"] == 512
    # issue #36: a finished job's progress says done (it kept its last "screen 1101/1468")
    n = report["trials"]["total"]
    assert n >= 1 and job["progress"] == {"phase": "done", "done": n, "total": n}
    studies = client.get("/v1/studies", headers=_h(token)).json()
    assert [s["name"] for s in studies] == [report["study"]]
    one = client.get(f"/v1/studies/{report['study']}", headers=_h(token)).json()
    assert one["n_trials"] >= 1 and one["user_attrs"]["workload"] == "fcn"


def test_identical_requests_share_one_active_job(client: Any, token: str) -> None:
    ids = {
        client.post(
            "/v1/suggestions", json={"model": "fcn", "budget_usd": 40, "seed": s}, headers=_h(token)
        ).json()["id"]
        for s in (3, 4, 5)  # the seed does not name the study: one job at a time per study
    }
    assert len(ids) == 1
    wait_job(client, ids.pop(), token)
    body = {"model": "fcn", "budget_usd": 40, "seed": 3}
    ids = {
        client.post("/v1/suggestions", json=body, headers=_h(token)).json()["id"] for _ in range(3)
    }
    assert len(ids) == 1
    wait_job(client, ids.pop(), token)


BAD_SPACE = (
    "workload: fcn\nbatch_sizes: [256, 512]\nhyperparameters:\n  lr: {type: float, low: 1}\n"
)


def test_a_bad_space_is_refused_at_the_door(client: Any, token: str) -> None:
    body = {"model": "fcn", "space": BAD_SPACE}
    r = client.post("/v1/suggestions", json=body, headers=_h(token))
    # The request is resolved (workload, space) to name its study before anything is queued;
    # a named study is checked the same way.
    assert r.status_code == 400, r.text
    named = client.post("/v1/suggestions", json={**body, "study_name": "x"}, headers=_h(token))
    assert named.status_code == 400, named.text
    assert "lr" in r.json()["detail"] and "To fix" in r.json()["detail"], r.text


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"budget_usd": 5}, "model", "Field required"),
        ({"model": "fcn", "budget_usd": -1}, "budget_usd", "greater than 0"),
        ({"model": "fcn", "trials": 10**9}, "trials", "less than or equal"),
        ({"model": "fcn", "colour": "red"}, "colour", "Extra inputs"),
        ({"model": "os:system"}, "model", "built-in workloads only"),
        ({"model": "no-such-net"}, "model", "use one of: "),
        ({"model": "fcn", "study_name": "../../etc/passwd"}, "study_name", "no '/' or '..'"),
        ({"model": "fcn", "sampler": "magic"}, "sampler", "'tpe'"),
        ({"model": "fcn", "epochs_at": [[256]]}, "epochs_at.0.1", "Field required"),  # issue #19
    ],
)
def test_bad_bodies_get_422_naming_the_field(
    client: Any, token: str, body: dict[str, Any], field: str, words: str
) -> None:
    r = client.post("/v1/suggestions", json=body, headers=_h(token))
    assert r.status_code == 422
    problems = {d["field"]: d["problem"] for d in r.json()["detail"]}
    assert field in problems and words in problems[field], problems


def test_epochs_at_reaches_the_study_and_bad_pairs_are_400(client: Any, token: str) -> None:
    body = {"model": "fcn", "budget_usd": 50, "epochs_at": [[2048, 30], [256, 10]]}
    r = client.post("/v1/suggestions", json=body, headers=_h(token))
    assert r.status_code == 202, r.text
    job = wait_job(client, r.json()["id"], token)
    assert job["status"] == "done", job["error"]
    study = job["result"]["study"]
    one = client.get(f"/v1/studies/{study}", headers=_h(token)).json()
    assert one["user_attrs"]["epochs_at"] == [[256, 10], [2048, 30]]
    bad = client.post(
        "/v1/suggestions", json={"model": "fcn", "epochs_at": [[256, 0]]}, headers=_h(token)
    )
    assert bad.status_code == 400 and "--epochs-at" in bad.json()["detail"], bad.text


def test_malformed_json_is_422(client: Any, token: str) -> None:
    r = client.post(
        "/v1/suggestions",
        content=b'{"model": "fcn",',
        headers={**_h(token), "Content-Type": "application/json"},
    )
    assert r.status_code == 422


def test_oversized_body_is_413_and_runs_nothing(client: Any, token: str) -> None:
    space = "x" * 30_000
    r = client.post("/v1/suggestions", json={"model": "fcn", "space": space}, headers=_h(token))
    assert r.status_code == 413
    assert "over 20000 bytes" in r.json()["detail"]
    assert client.get("/v1/studies", headers=_h(token)).json() == []


@pytest.mark.parametrize("name", ["..%2F..%2Fetc%2Fpasswd", "..", "a..b", "%2Fetc%2Fpasswd"])
def test_path_traversal_in_study_names_is_refused(client: Any, token: str, name: str) -> None:
    r = client.get(f"/v1/studies/{name}", headers=_h(token))
    assert r.status_code in (404, 422), r.text
    assert "root:" not in r.text


def test_catalog_and_unknown_job(client: Any, token: str) -> None:
    rows = client.get(
        "/v1/catalog",
        params={"provider": "aws", "accelerator": "V100", "snapshot": "2021-02"},
        headers=_h(token),
    ).json()["rows"]
    prices = {r["instance_type"]: r["on_demand_usd_per_h"] for r in rows if r["service"] == "ec2"}
    assert prices["p3.2xlarge"] == pytest.approx(3.06)
    assert client.get("/v1/jobs/" + "f" * 32, headers=_h(token)).status_code == 404
    assert client.get("/v1/jobs/nothex", headers=_h(token)).status_code == 422
