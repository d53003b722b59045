"""One spec through every back end: each builds a request that carries the same job."""

from __future__ import annotations

import json
from typing import Any

import pytest
from advisor.providers import registry
from advisor.search_spaces.space import CategoricalParam, FloatParam, IntParam

from advisor.errors import AdvisorError

pytestmark = pytest.mark.slow  # imports each cloud SDK

MACHINE = {
    "sagemaker": "ml.g5.2xlarge",
    "vertex": "g2-standard-8",
    "azureml": "Standard_NV36ads_A10_v5",
}
OPTIONS: dict[str, dict[str, Any]] = {
    "sagemaker": {"role": "arn:aws:iam::123456789012:role/R"},
    "vertex": {"project": "p1"},
    "azureml": {"compute": "gpu"},
}
PARAMS = (FloatParam("momentum", 0.5, 0.99), IntParam("layers", 1, 4),
          CategoricalParam("optimizer", ("sgd", "adam")))  # fmt: skip


@pytest.fixture(params=registry.names())
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_same_spec_same_job_everywhere(provider: str, make_spec: Any) -> None:
    spec = make_spec(instance_type=MACHINE[provider], hyperparameters=PARAMS, output=None,
                     accelerator="L4", accelerator_count=1, max_trials=7, parallel_trials=2)  # fmt: skip
    backend = registry.get_backend(provider, **OPTIONS[provider])
    text = json.dumps(backend.build_request(spec))
    for must in (
        "momentum",
        "layers",
        "optimizer",
        "val_accuracy",
        MACHINE[provider] if provider != "azureml" else "gpu",
        "advisor.train" if provider != "sagemaker" else spec.image,
    ):
        assert must in text, (provider, must)
    # Budget numbers appear as the service spells them.
    assert {"sagemaker": '"MaxNumberOfTrainingJobs": 7', "vertex": '"maxTrialCount": 7',
            "azureml": '"maxTotalTrials": 7'}[provider] in text  # fmt: skip


def test_every_backend_refuses_an_unknown_strategy_clearly(provider: str, make_spec: Any) -> None:
    backend = registry.get_backend(provider, **OPTIONS[provider])
    spec = make_spec(instance_type=MACHINE[provider], hyperparameters=PARAMS, output=None,
                     strategy="hyperband")  # fmt: skip
    if "hyperband" in backend.strategies:
        assert backend.build_request(spec)
    else:
        with pytest.raises(AdvisorError, match="To fix: use --strategy"):
            backend.build_request(spec)


def test_every_backend_maps_only_its_own_cloud(provider: str) -> None:
    cls = registry.backend_class(provider)
    foreign = {"sagemaker": "vertex:n1-standard-8", "vertex": "azure-ml:Standard_NC6",
               "azureml": "ec2:p3.2xlarge"}[provider]  # fmt: skip
    with pytest.raises(AdvisorError, match="is not one of"):
        cls.machine_type(foreign, None)
