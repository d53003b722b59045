"""POST /v1/predict: an uploaded probe gives the same forecast as `advisor predict --probe`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from fastapi.testclient import TestClient
from perf_fixtures import probe, with_synthetic_trace

from advisor.cli.main import cli
from advisor.service import auth
from advisor.service.app import Settings, create_app
from advisor.service.dispatch import ThreadDispatcher

# issue #26: a probe made ready for prediction (its operator trace and loader time), so
# no trace is taken here (no torch import)
TRACE = {"data_s": 0.004}


def test_predict_matches_the_cli(tmp_path: Path, sqlite_url: str) -> None:
    p = with_synthetic_trace(
        dataclasses.replace(probe(), fingerprint=dict(TRACE))
    )  # traced: no torch import
    path = tmp_path / "probe.json"
    path.write_text(p.to_json())
    machines = ["p2.xlarge", "p3.2xlarge", "p3.16xlarge"]
    args = ["predict", "--model", "fcn", "--batch-size", str(p.batch_size), "--instances"]
    local = CliRunner().invoke(
        cli,
        [
            *args,
            ",".join(machines),
            "--snapshot",
            "2021-02",
            "--epochs",
            "14",
            "--probe",
            str(path),
            "--json",
        ],
    )
    assert local.exit_code == 0, local.output
    token = auth.create_token(sqlite_url, "ci")
    dispatcher = ThreadDispatcher(sqlite_url)
    body: dict[str, Any] = {
        "probe": json.loads(p.to_json()),
        "instances": machines,
        "snapshot": "2021-02",
        "epochs": 14,
    }
    with TestClient(create_app(Settings(sqlite_url, dispatcher))) as client:
        r = client.post("/v1/predict", json=body, headers={"Authorization": f"Bearer {token}"})
        bad = client.post(
            "/v1/predict",
            json={**body, "instances": ["../etc"]},
            headers={"Authorization": f"Bearer {token}"},
        )
    dispatcher.close()
    assert r.status_code == 200, r.text
    remote, cli_out = r.json(), json.loads(local.stdout)
    assert [m["machine"] for m in remote["machines"]] == [m["machine"] for m in cli_out["machines"]]
    for a, b in zip(remote["machines"], cli_out["machines"], strict=True):
        assert a["estimate"]["runtime_s"] == b["estimate"]["runtime_s"]
        assert a["estimate"]["cost_usd"] == b["estimate"]["cost_usd"]
    assert remote["fastest"] == cli_out["fastest"]
    assert bad.status_code == 422
