"""Issue #26: the service traces a built-in workload on the meta device when the uploaded
probe lacks its operator trace, so its GPU rows come from the kernel model as `advisor
predict`'s do."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from perf_fixtures import probe

from advisor.service import auth
from advisor.service.app import Settings, create_app
from advisor.service.dispatch import ThreadDispatcher


@pytest.mark.slow
def test_an_untraced_upload_is_traced_on_the_meta_device(sqlite_url: str) -> None:
    untraced = dataclasses.replace(probe(batch=256), fingerprint={"data_s": 0.004})
    assert untraced.operator_trace is None
    token = auth.create_token(sqlite_url, "ci")
    dispatcher = ThreadDispatcher(sqlite_url)
    body: dict[str, Any] = {
        "probe": json.loads(untraced.to_json()),
        "instances": ["ec2:g4dn.xlarge", "ec2:g5.12xlarge"],
    }
    with TestClient(create_app(Settings(sqlite_url, dispatcher))) as client:
        r = client.post("/v1/predict", json=body, headers={"Authorization": f"Bearer {token}"})
    dispatcher.close()
    assert r.status_code == 200, r.text
    doc = r.json()
    assert "note" not in doc  # nothing was left out
    for row in doc["machines"]:
        assert row["prediction"]["basis"].startswith("kernel model fitted on")
        assert "conv" in row["prediction"]["top_operators"][0]["operator"]  # fcn's own trace
