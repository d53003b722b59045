"""Issue #34: the service's /v1/predict carries each row's memory per device and names no row
that does not fit as fastest or cheapest (the steps: tests/helpers/memory_fixtures.py)."""

from __future__ import annotations

import json

import memory_fixtures
import pytest
from memory_fixtures import sized_probe

fresh_memos = memory_fixtures.fresh_memos  # autouse: the memos forgotten around each test


@pytest.mark.slow  # about 4 s: the app, the catalog and the kernel model
def test_service_predict_carries_the_memory_and_names_no_row_that_does_not_fit(
    sqlite_url: str,
) -> None:
    from fastapi.testclient import TestClient

    from advisor.service import auth
    from advisor.service.app import Settings, create_app
    from advisor.service.dispatch import ThreadDispatcher

    token = auth.create_token(sqlite_url, "ci")
    dispatcher = ThreadDispatcher(sqlite_url)
    machines = ["ec2:g4dn.xlarge", "ec2:g6.xlarge", "ec2:p5.4xlarge"]  # T4, L4, H100
    body = {"probe": json.loads(sized_probe(8).to_json()), "instances": machines, "epochs": 5}
    with TestClient(create_app(Settings(sqlite_url, dispatcher))) as client:
        r = client.post("/v1/predict", json=body, headers={"Authorization": f"Bearer {token}"})
    dispatcher.close()
    assert r.status_code == 200, r.text
    out = r.json()
    fits = {m["machine"]: m["memory"]["fits"] for m in out["machines"]}
    assert fits == {"ec2:g4dn.xlarge": False, "ec2:g6.xlarge": False, "ec2:p5.4xlarge": True}
    assert out["fastest"] == out["cheapest"] == "ec2:p5.4xlarge"
    assert sorted(out["left_out"]["does not fit"]) == ["ec2:g4dn.xlarge", "ec2:g6.xlarge"]


@pytest.mark.slow  # about 8 s: a study through the service's job runner
def test_service_suggestion_never_recommends_or_tries_a_row_that_does_not_fit(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service's own scorer (the local back end: screen, performance model, memory) on
    fake local probes of fcn carrying the hand-built steps."""
    import time

    from fastapi.testclient import TestClient
    from memory_fixtures import remember

    import advisor.study.run as run_mod
    from advisor.evaluation.local import LocalBackend
    from advisor.service import auth
    from advisor.service.app import Settings, create_app
    from advisor.service.dispatch import ThreadDispatcher

    def backend(options, storage, space, progress=None):  # type: ignore[no-untyped-def]
        return LocalBackend(storage, run_probe=lambda r: sized_probe(r.batch_size, "fcn", 2.0))

    monkeypatch.setattr(run_mod, "local_backend", backend)
    remember(8, 64, workload="fcn")
    token = auth.create_token(sqlite_url, "ci")
    headers = {"Authorization": f"Bearer {token}"}
    space = (
        "workload: fcn\nbatch_sizes: [8, 64]\nmachines:\n  instance_types: "
        "[ec2:g4dn.xlarge, ec2:g6.xlarge, ec2:p5.4xlarge]\n"
    )
    body = {"model": "fcn", "budget_usd": 1e6, "space": space, "local": False, "spot": False,
            "plan": "accumulation=1,checkpointing=none,sharding=none"}  # issue #35: pinned  # fmt: skip
    dispatcher = ThreadDispatcher(sqlite_url)
    with TestClient(create_app(Settings(sqlite_url, dispatcher))) as client:
        r = client.post("/v1/suggestions", json=body, headers=headers)
        assert r.status_code == 202, r.text
        end = time.monotonic() + 120
        while time.monotonic() < end:
            job = client.get(f"/v1/jobs/{r.json()['id']}", headers=headers).json()
            if job["status"] in ("done", "failed"):
                break
            time.sleep(0.1)
    dispatcher.close()
    assert job["status"] == "done", job.get("error")
    report = job["result"]
    fitting = {("ec2:p5.4xlarge", 8)}
    assert (report["recommended"]["machine"], report["recommended"]["batch_size"]) in fitting
    assert all((row["machine"], row["batch_size"]) in fitting for row in report["ranking"])
    assert report["memory_left_out"]["count"] == 5 and report["probes"]["spent_usd"] == 0.0
    assert report["trials"]["failed"] == 0 and report["trials"]["total"] >= 1
