"""Azure ML: the SDK's own serialised sweep job, and the PUT a real MLClient sends."""

from __future__ import annotations

import math
from typing import Any

import fake_servers  # tests/helpers, on pytest's pythonpath
import pytest

from advisor.errors import AdvisorError

pytestmark = pytest.mark.slow  # azure.ai.ml takes ~2 s to import


class FakeToken:
    """A TokenCredential that hands out a dummy bearer token."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken("dummy-token", 4102444800)


def test_random_sweep_serialises_search_space_limits_and_bandit(make_spec: Any) -> None:
    from advisor.providers.azureml import AzureMLBackend

    spec = make_spec(instance_type="Standard_NC6s_v3", strategy="random", early_stopping=True)
    body = AzureMLBackend(compute="gpu-nc6").build_request(spec)["properties"]
    space = body["searchSpace"]
    assert space["lr"][0] == "loguniform"
    assert space["lr"][1] == pytest.approx([math.log(0.01), math.log(0.3)])  # natural-log bounds
    assert space["momentum"] == ["uniform", [0.5, 0.99]]
    assert space["width"] == ["quniform", [8, 200, 1]]  # 193 values: too many for a choice
    assert space["optimizer"] == ["choice", [["sgd", "adam"]]]
    assert body["samplingAlgorithm"]["samplingAlgorithmType"] == "Random"
    assert body["objective"] == {"goal": "maximize", "primaryMetric": "val_accuracy"}
    assert body["limits"]["maxTotalTrials"] == 12 and body["limits"]["maxConcurrentTrials"] == 3
    assert body["earlyTermination"]["policyType"] == "Bandit"
    assert body["computeId"] == "gpu-nc6"
    assert body["experimentName"] == "advisor-fcn"
    command = body["trial"]["command"]
    assert command.startswith("python -m advisor.train --model fcn --batch-size 512 --epochs 14")
    assert "--lr ${{search_space.lr}}" in command
    assert body["trial"]["environmentId"].startswith("azureml:CliV2AnonymousEnvironment:")


def test_bayesian_uses_only_choice_uniform_quniform(make_spec: Any) -> None:
    from advisor.providers.azureml import AzureMLBackend
    from advisor.search_spaces.space import CategoricalParam, FloatParam, IntParam

    params = (FloatParam("momentum", 0.5, 0.99), IntParam("layers", 1, 4),
              CategoricalParam("optimizer", ("sgd", "adam")))  # fmt: skip
    spec = make_spec(instance_type="Standard_NC6s_v3", hyperparameters=params)
    body = AzureMLBackend(compute="c").build_request(spec)["properties"]
    assert body["samplingAlgorithm"]["samplingAlgorithmType"] == "Bayesian"
    assert {v[0] for v in body["searchSpace"].values()} <= {"choice", "uniform", "quniform"}
    assert body["searchSpace"]["layers"] == ["choice", [[1, 2, 3, 4]]]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({}, "Bayesian sampling accepts only choice, uniform and quniform, but \\['lr'\\]"),
        ({"strategy": "hyperband"}, "does not offer the 'hyperband'"),
        ({"strategy": "grid"}, "grid sampling accepts only choice"),
        ({"strategy": "random", "alternative_instance_types": ("Standard_NC12",)}, "one compute"),
    ],
)
def test_refusals(make_spec: Any, overrides: dict[str, Any], message: str) -> None:
    from advisor.providers.azureml import AzureMLBackend

    spec = make_spec(instance_type="Standard_NC6s_v3", **overrides)
    with pytest.raises(AdvisorError, match=message):
        AzureMLBackend(compute="c").build_request(spec)


def test_bayesian_refuses_early_termination(make_spec: Any) -> None:
    from advisor.providers.azureml import AzureMLBackend
    from advisor.search_spaces.space import FloatParam

    spec = make_spec(instance_type="Standard_NC6s_v3", early_stopping=True,
                     hyperparameters=(FloatParam("momentum", 0.5, 0.99),))  # fmt: skip
    with pytest.raises(AdvisorError, match="does not support early termination"):
        AzureMLBackend(compute="c").build_request(spec)


def test_mlclient_puts_the_sweep(make_spec: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from advisor.providers.azureml import AzureMLBackend
    from azure.ai.ml import MLClient

    def respond(method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "PUT" and "/jobs/" in path:
            return 201, {
                **body,
                "id": path.split("?")[0],
                "name": path.split("?")[0].split("/")[-1],
            }
        return 404, {"error": {"code": "NotFound", "message": path}}

    spec = make_spec(instance_type="Standard_NC6s_v3", strategy="random",
                     image="azureml:advisor-env:3")  # fmt: skip
    with fake_servers.recording_server(respond) as (url, seen):
        monkeypatch.setenv("AZUREML_DEV_URL_MFE", url)
        client = MLClient(FakeToken(), subscription_id="00000000-0000-0000-0000-000000000001",
                          resource_group_name="rg", workspace_name="ws")  # fmt: skip
        backend = AzureMLBackend(client=client, compute="gpu-nc6")
        built = backend.build_request(spec)
        submission = backend.submit(spec)
    puts = [r for r in seen if r["method"] == "PUT"]
    assert len(puts) == 1
    put = puts[0]
    assert (
        "/resourceGroups/rg/providers/Microsoft.MachineLearningServices/workspaces/ws/jobs/"
        "advisor-fcn-test-1" in put["path"]
    )
    sent = put["body"]["properties"]
    assert sent["searchSpace"] == built["properties"]["searchSpace"]
    assert sent["samplingAlgorithm"] == built["properties"]["samplingAlgorithm"]
    assert sent["objective"] == {"goal": "maximize", "primaryMetric": "val_accuracy"}
    assert sent["limits"]["maxTotalTrials"] == 12
    assert sent["computeId"].endswith("/computes/gpu-nc6")
    assert sent["trial"]["environmentId"].endswith("/environments/advisor-env/versions/3")
    assert put["headers"]["Authorization"] == "Bearer dummy-token"
    assert submission.job_id == "advisor-fcn-test-1"
    assert "workspace ws" in submission.identity and "dummy-token" not in submission.identity


def test_submit_needs_a_compute_cluster(make_spec: Any) -> None:
    from advisor.providers.azureml import AzureMLBackend

    spec = make_spec(instance_type="Standard_NC6s_v3", strategy="random")
    with pytest.raises(AdvisorError, match=r"VM size Standard_NC6s_v3.*--compute"):
        AzureMLBackend(client=object()).submit(spec)


def test_unnamed_workspace_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from advisor.providers.azureml import AzureMLBackend

    for var in ("AZURE_SUBSCRIPTION_ID", "AZURE_RESOURCE_GROUP", "AZUREML_WORKSPACE_NAME"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(AdvisorError, match="--subscription"):
        AzureMLBackend(compute="c").identity()
