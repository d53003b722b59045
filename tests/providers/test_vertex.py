"""Vertex AI: the real JobServiceClient (REST, anonymous credentials) against a local server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fake_servers  # tests/helpers, on pytest's pythonpath
import pytest

from advisor.errors import AdvisorError

pytestmark = pytest.mark.slow  # google.cloud.aiplatform_v1 takes ~2 s to import

JOB = "projects/p1/locations/us-central1/hyperparameterTuningJobs/42"


def _client(url: str) -> Any:
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    return aiplatform_v1.JobServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options=ClientOptions(api_endpoint=url),
    )


def _respond(method: str, path: str, body: Any) -> tuple[int, Any]:
    if method == "POST":
        return 200, {**body, "name": JOB, "state": "JOB_STATE_PENDING"}
    return 200, {
        "name": JOB,
        "displayName": "advisor-fcn-test-1",
        "state": "JOB_STATE_SUCCEEDED",
        "maxTrialCount": 12,
        "studySpec": {
            "metrics": [{"metricId": "val_accuracy", "goal": "MAXIMIZE"}],
            "parameters": [
                {"parameterId": "lr", "doubleValueSpec": {"minValue": 0.01, "maxValue": 0.3}},
                {"parameterId": "width", "integerValueSpec": {"minValue": "8", "maxValue": "200"}},
            ],
        },
        "trialJobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-8"}}]},
        "trials": [
            {
                "id": "1",
                "state": "SUCCEEDED",
                "parameters": [{"parameterId": "lr", "value": 0.05},
                               {"parameterId": "width", "value": 40}],
                "finalMeasurement": {"metrics": [{"metricId": "val_accuracy", "value": 0.9}]},
                "startTime": "2026-11-22T10:00:00Z",
                "endTime": "2026-11-22T10:10:00Z",
            },
            {"id": "2", "state": "INFEASIBLE", "parameters": []},
        ],
    }  # fmt: skip


def test_the_sdk_sends_the_built_request(make_spec: Any) -> None:
    from advisor.providers.vertex import VertexBackend

    spec = make_spec(instance_type="n1-standard-8", output="gs://bucket/advisor",
                     early_stopping=True, spot=True)  # fmt: skip
    with fake_servers.recording_server(_respond) as (url, seen):
        backend = VertexBackend(client=_client(url), project="p1", location="us-central1")
        built = backend.build_request(spec)
        job_id = backend._submit(spec, built)
    assert job_id == JOB
    (post,) = seen
    assert post["method"] == "POST"
    assert post["path"].startswith("/v1/projects/p1/locations/us-central1/hyperparameterTuningJobs")
    sent = post["body"]
    assert sent == built  # the dry run shows exactly what the SDK sends
    pool = sent["trialJobSpec"]["workerPoolSpecs"][0]
    assert pool["machineSpec"] == {
        "machineType": "n1-standard-8", "acceleratorType": 3, "acceleratorCount": 1
    }  # 3 = NVIDIA_TESLA_V100  # fmt: skip
    assert pool["containerSpec"]["args"][:4] == ["--model", "fcn", "--batch-size", "512"]
    assert sent["trialJobSpec"]["scheduling"]["strategy"] == 4  # SPOT
    params = {p["parameterId"]: p for p in sent["studySpec"]["parameters"]}
    assert params["lr"]["scaleType"] == 2  # UNIT_LOG_SCALE
    assert params["lr"]["doubleValueSpec"] == {"minValue": 0.01, "maxValue": 0.3}
    assert params["width"]["integerValueSpec"] == {"minValue": "8", "maxValue": "200"}
    assert params["optimizer"]["categoricalValueSpec"]["values"] == ["sgd", "adam"]
    assert sent["studySpec"]["metrics"] == [{"metricId": "val_accuracy", "goal": 1}]  # MAXIMIZE
    assert "medianAutomatedStoppingSpec" in sent["studySpec"]
    assert (sent["maxTrialCount"], sent["parallelTrialCount"]) == (12, 3)


def test_status_and_results_read_the_job_back() -> None:
    from advisor.providers.vertex import VertexBackend

    with fake_servers.recording_server(_respond) as (url, _):
        backend = VertexBackend(client=_client(url), project="p1")
        status = backend.status("42")
        results = backend.results(JOB)
    assert status["state"] == "JOB_STATE_SUCCEEDED"
    assert status["trials"] == {"SUCCEEDED": 1, "INFEASIBLE": 1}
    ok = results[0]
    assert ok.status == "completed" and ok.metric == pytest.approx(0.9)
    assert ok.hyperparameters == {"lr": pytest.approx(0.05), "width": 40}
    assert ok.runtime_s == pytest.approx(600.0)
    assert results[1].status == "failed" and results[1].metric is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"alternative_instance_types": ("n1-standard-16",)}, "one machine type"),
        ({"strategy": "hyperband"}, "does not offer the 'hyperband'"),
        ({"strategy": "grid"}, "continuous"),
        ({"accelerator": "Gaudi2"}, "no accelerator type for 'Gaudi2'"),
    ],
)
def test_refusals(make_spec: Any, overrides: dict[str, Any], message: str) -> None:
    from advisor.providers.vertex import VertexBackend

    spec = make_spec(instance_type="n1-standard-8", output=None, **overrides)
    with pytest.raises(AdvisorError, match=message):
        VertexBackend(project="p1").build_request(spec)


def test_missing_credentials_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from advisor.providers.vertex import VertexBackend

    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))
    with pytest.raises(AdvisorError, match="Google Cloud credentials"):
        VertexBackend(project="p1").identity()
