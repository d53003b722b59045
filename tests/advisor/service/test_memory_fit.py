"""Issue #34: the service's /v1/predict carries each row's memory per device and names no row
that does not fit as fastest or cheapest (the steps: tests/helpers/memory_fixtures.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from memory_fixtures import sized_probe

from advisor.prediction.perf import device_memory, traces


@pytest.fixture(autouse=True)
def fresh_memos() -> Iterator[None]:
    traces.forget()
    device_memory.forget()
    yield
    traces.forget()
    device_memory.forget()


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
