"""The tuning-job endpoints (plan, submit with dry-run, status, import) in process, against the
fake SageMaker wire of the tuning tests (moto; botocore's own check of the request)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import wires  # tests/helpers, on pytest's pythonpath
from fastapi.testclient import TestClient
from tuning_studies import make_study

from advisor.service import auth, studies
from advisor.service.app import Settings, create_app
from advisor.service.dispatch import ThreadDispatcher

ROUND_TRIP = [
    wires.Outcome("completed", 0.05, "sgd", 0.91, 300.0),
    wires.Outcome("failed", 0.2, "adam", None, 30.0),
    wires.Outcome("running", 0.1, "sgd", None, 0.0),
]
TARGET = {"provider": "sagemaker", "provider_options": dict(wires.SageMakerWire.options)}
PLAN = {**TARGET, "study": "fcn-study", "options": {"output": "s3://bucket/advisor"}}


@pytest.fixture
def client(sqlite_url: str) -> Iterator[Any]:
    pytest.importorskip("boto3")
    make_study(sqlite_url, machine="sagemaker:ml.g5.2xlarge")
    dispatcher = ThreadDispatcher(sqlite_url, threads=1)
    token = auth.create_token(sqlite_url, "ci")
    with TestClient(create_app(Settings(sqlite_url, dispatcher))) as c:
        c.headers["Authorization"] = f"Bearer {token}"
        yield c
    dispatcher.close()


def test_plan_and_dry_run_give_the_request_the_sdk_accepts(client: Any) -> None:
    plan = client.post("/v1/tuning/plan", json=PLAN)
    assert plan.status_code == 200, plan.text
    body = plan.json()
    assert body["spec"]["instance_type"] == "ml.g5.2xlarge"
    assert body["spec"]["fixed"]["batch_size"] == 512
    # The job's name (a timestamp when not given) is pinned so the two calls may straddle a second.
    named = {**PLAN, "options": {**PLAN["options"], "job_name": "fcn-tune-1"}}
    plan = client.post("/v1/tuning/plan", json=named)
    body = plan.json()
    dry = client.post("/v1/tuning/jobs", json={**named, "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert dry.json()["dry_run"] is True and dry.json()["request"] == body["request"]
    wires.SageMakerWire().validate(body["request"])  # botocore's own rules
    # Refusals are one-line 400s; unknown options and bad names are 422s.
    too_many = {**PLAN, "options": {**PLAN["options"], "parallel_trials": 11, "max_trials": 20}}
    r = client.post("/v1/tuning/plan", json=too_many)
    assert r.status_code == 400 and "at most 10" in r.text
    assert client.post("/v1/tuning/plan", json={**PLAN, "study": "../x"}).status_code == 422
    internal = client.post("/v1/tuning/plan", json={**PLAN, "study": "advisor-probe-cache"})
    assert internal.status_code == 422, internal.text
    bad_opt = {**PLAN, "provider_options": {"secret_key": "x"}}
    assert client.post("/v1/tuning/plan", json=bad_opt).status_code == 422
    no_image = client.post("/v1/tuning/jobs", json=PLAN)
    assert no_image.status_code == 400 and "image" in no_image.text


@pytest.mark.slow
def test_submit_status_and_import_of_a_moto_job(
    client: Any, sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import optuna
    from advisor.providers.tuning import Submission

    wire = wires.SageMakerWire()
    with wire.connected(tmp_path, monkeypatch) as backend:
        r = client.post("/v1/tuning/jobs", json={**PLAN, "image": wire.image})
        assert r.status_code == 200, r.text
        sub = Submission(**{k: v for k, v in r.json().items() if k != "dry_run"})
        wire.run_trials(backend, sub, ROUND_TRIP)
        status = client.get(
            f"/v1/tuning/jobs/{sub.job_id}", params={"provider": "sagemaker", "region": "us-east-1"}
        )
        assert status.status_code == 200, status.text
        assert status.json()["provider"] == "sagemaker"
        url = f"/v1/tuning/jobs/{sub.job_id}/import"
        first = client.post(url, json={**TARGET, "study": "fcn-study"})
        again = client.post(url, json={**TARGET, "study": "fcn-study"})
    assert first.status_code == 200, first.text
    assert first.json()["trials_seen"] == len(ROUND_TRIP)
    assert len(first.json()["trials_added"]) == 2  # the running job is not imported yet
    assert again.json()["trials_added"] == []  # idempotent
    study = optuna.load_study(study_name="fcn-study", storage=sqlite_url)
    managed = [t for t in study.trials if t.user_attrs.get("source") == "managed"]
    assert sorted(t.state.name for t in managed) == ["COMPLETE", "FAIL"]
    # ...and the service's study view shows them.
    assert studies.read_study(sqlite_url, "default", "fcn-study")["n_trials"] == 3
