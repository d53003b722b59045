"""Each cloud's wire for the provider contract suite: the SDK's own check of a request, a back
end connected to a fake service (moto for SageMaker; local HTTP servers that the real Vertex
and Azure ML clients talk to; a real MLflow store for Azure's trial runs), and a way to make
the fake service run trials with given outcomes."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from advisor.providers.tuning import Submission, TuningBackend
from fake_servers import recording_server

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
NOW = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class Outcome:
    """One training job the fake service runs: its state, the values it tried, its metric."""

    status: str  # completed | failed | stopped | running
    lr: float
    optimizer: str
    metric: float | None
    runtime_s: float
    step_s: float | None = None  # the measured step time advisor.train reports (step_s)


class Wire:
    name: str
    machine: str  # the service's machine type (tests use it as --instance)
    catalog_key: str  # its catalog row (the managed service's price)
    options: ClassVar[dict[str, Any]]
    refusals: ClassVar[list[tuple[dict[str, Any], str]]]
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/advisor:1"
    counts_trials = True  # whether the fake service counts the trials it ran in its status
    # whether a trial's measured step time comes back (Vertex keeps only the objective metric)
    reports_step_s = True
    # what a submission must name as who submitted it: the account, project or workspace the
    # connected back end was given
    identity: ClassVar[tuple[str, ...]] = ()

    def validate(self, request: dict[str, Any]) -> None:
        """Check ``request`` with the SDK's own rules (raises when it does not accept it)."""
        raise NotImplementedError

    def check_spot(self, request: dict[str, Any]) -> None:
        """Assert the request runs trials on spot capacity and lets them resume."""
        raise NotImplementedError

    @contextmanager
    def connected(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TuningBackend]:
        raise NotImplementedError
        yield

    def run_trials(self, backend: TuningBackend, sub: Submission, trials: list[Outcome]) -> None:
        """Make the fake service run ``trials`` for submitted job ``sub`` (plus a job of
        another tuning job that must not be imported, where the service could confuse them)."""
        raise NotImplementedError


# -- SageMaker: botocore's Stubber, moto ------------------------------------------------------


class SageMakerWire(Wire):
    name = "sagemaker"
    machine = "ml.g5.2xlarge"
    catalog_key = "sagemaker:ml.g5.2xlarge"
    options: ClassVar[dict[str, Any]] = {"role": ROLE, "region": "us-east-1"}
    counts_trials = False
    identity: ClassVar[tuple[str, ...]] = ("account 123456789012", "region us-east-1")
    refusals: ClassVar[list[tuple[dict[str, Any], str]]] = [
        ({"parallel_trials": 11, "max_trials": 20}, "at most 10 trials in parallel"),
        ({"strategy": "grid"}, "grid search takes only categorical"),
        ({"instance_type": "ml.g5.3xlarge"}, "InstanceType='ml.g5.3xlarge' is not a valid"),
    ]

    def check_spot(self, request: dict[str, Any]) -> None:
        d = request["TrainingJobDefinition"]
        assert d["EnableManagedSpotTraining"] is True
        stop = d["StoppingCondition"]
        assert stop["MaxWaitTimeInSeconds"] >= stop["MaxRuntimeInSeconds"]
        assert d["CheckpointConfig"]["S3Uri"].endswith("/checkpoints")

    def validate(self, request: dict[str, Any]) -> None:
        import boto3
        from botocore.stub import Stubber

        client = boto3.client("sagemaker", region_name="us-east-1")
        with Stubber(client) as stub:
            stub.add_response(
                "create_hyper_parameter_tuning_job",
                {"HyperParameterTuningJobArn": "arn:aws:sagemaker:us-east-1:1:x/y"},
                request,
            )
            client.create_hyper_parameter_tuning_job(**request)
            stub.assert_no_pending_responses()

    @contextmanager
    def connected(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TuningBackend]:
        from advisor.providers.sagemaker import SageMakerBackend
        from moto import mock_aws

        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        with mock_aws():
            yield SageMakerBackend(role=ROLE, region="us-east-1")

    def run_trials(self, backend: TuningBackend, sub: Submission, trials: list[Outcome]) -> None:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.sagemaker.models import sagemaker_backends

        client = backend.client  # type: ignore[attr-defined]
        fake = sagemaker_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        definition = sub.request["TrainingJobDefinition"]
        names = [f"{sub.job_id}-{i + 1:03d}-abcd{i:04d}" for i in range(len(trials))]
        for name, t in zip(names, trials, strict=True):
            self._create(client, definition, name, {"lr": str(t.lr), "optimizer": t.optimizer})
            job = fake.training_jobs[name]
            job.training_job_status = {"completed": "Completed", "failed": "Failed",
                                       "stopped": "Stopped", "running": "InProgress"}[t.status]  # fmt: skip
            job.training_start_time = NOW
            job.training_end_time = NOW + dt.timedelta(seconds=t.runtime_s)
            job.final_metric_data_list = [
                {"MetricName": name, "Value": value, "Timestamp": NOW}
                for name, value in (("val_accuracy", t.metric), ("step_s", t.step_s))
                if value is not None
            ]
        # Another tuning job whose name starts like this one ("<job>-2"): not ours.
        other = f"{sub.job_id}-2-001-abcd9999"
        self._create(client, definition, other, {"lr": "0.1", "optimizer": "sgd"})

    @staticmethod
    def _create(client: Any, definition: dict[str, Any], name: str, hps: dict[str, str]) -> None:
        config = definition.get("ResourceConfig") or {
            "InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30
        }  # fmt: skip
        client.create_training_job(
            TrainingJobName=name,
            HyperParameters={**definition["StaticHyperParameters"], **hps},
            AlgorithmSpecification={"TrainingImage": "img:1", "TrainingInputMode": "File"},
            RoleArn=ROLE,
            OutputDataConfig=definition["OutputDataConfig"],
            ResourceConfig=config,
            StoppingCondition={"MaxRuntimeInSeconds": 3600},
            EnableManagedSpotTraining=definition.get("EnableManagedSpotTraining", False),
        )


# -- Vertex AI: the real JobServiceClient (REST) against a local server -----------------------


class VertexWire(Wire):
    name = "vertex"
    machine = "g2-standard-8"
    catalog_key = "vertex:g2-standard-8"
    reports_step_s = False
    options: ClassVar[dict[str, Any]] = {"project": "p1", "location": "us-central1"}
    identity: ClassVar[tuple[str, ...]] = ("Google Cloud project p1", "location us-central1")
    refusals: ClassVar[list[tuple[dict[str, Any], str]]] = [
        ({"strategy": "hyperband"}, "does not offer the 'hyperband'"),
        ({"alternative_instance_types": ("n1-standard-16",)}, "one machine type"),
        ({"accelerator": "Gaudi2"}, "no accelerator type for 'Gaudi2'"),
    ]

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}

    def check_spot(self, request: dict[str, Any]) -> None:
        job = request["trialJobSpec"]
        assert job["scheduling"]["strategy"] == 4  # Scheduling.Strategy.SPOT
        assert job["baseOutputDirectory"]["outputUriPrefix"].startswith("gs://")  # checkpoints

    def validate(self, request: dict[str, Any]) -> None:
        from google.cloud import aiplatform_v1

        # Strict parsing: an unknown field or a wrong type raises.
        job = aiplatform_v1.HyperparameterTuningJob.from_json(json.dumps(request))
        again = json.loads(
            aiplatform_v1.HyperparameterTuningJob.to_json(
                job, use_integers_for_enums=True, including_default_value_fields=False
            )
        )
        assert again == request

    def _respond(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "POST":
            name = (
                f"projects/p1/locations/us-central1/hyperparameterTuningJobs/{len(self.jobs) + 1}"
            )
            self.jobs[name] = {**body, "name": name, "state": "JOB_STATE_PENDING", "trials": []}
            return 200, self.jobs[name]
        name = path.split("?")[0].removeprefix("/v1/")
        if name not in self.jobs:
            return 404, {
                "error": {"code": 404, "message": f"{name} not found", "status": "NOT_FOUND"}
            }
        return 200, self.jobs[name]

    @contextmanager
    def connected(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TuningBackend]:
        from advisor.providers.vertex import VertexBackend
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import aiplatform_v1

        with recording_server(self._respond) as (url, _):
            client = aiplatform_v1.JobServiceClient(
                transport="rest",
                credentials=AnonymousCredentials(),
                client_options=ClientOptions(api_endpoint=url),
            )
            yield VertexBackend(client=client, project="p1")

    def run_trials(self, backend: TuningBackend, sub: Submission, trials: list[Outcome]) -> None:
        job = self.jobs[sub.job_id]
        states = {"completed": "SUCCEEDED", "failed": "INFEASIBLE", "stopped": "STOPPING",
                  "running": "ACTIVE"}  # fmt: skip
        for i, t in enumerate(trials):
            trial: dict[str, Any] = {
                "id": str(i + 1),
                "state": states[t.status],
                "parameters": [
                    {"parameterId": "lr", "value": t.lr},
                    {"parameterId": "optimizer", "value": t.optimizer},
                ],
                "startTime": NOW.isoformat().replace("+00:00", "Z"),
            }
            if t.status != "running":
                end = NOW + dt.timedelta(seconds=t.runtime_s)
                trial["endTime"] = end.isoformat().replace("+00:00", "Z")
            if t.metric is not None:
                trial["finalMeasurement"] = {"metrics": [{"metricId": "val_accuracy",
                                                          "value": t.metric}]}  # fmt: skip
            job["trials"].append(trial)
        job["state"] = "JOB_STATE_SUCCEEDED"


# -- Azure ML: MLClient against a local MFE server; trial runs in a real MLflow store ---------


class FakeToken:
    """A TokenCredential that hands out a dummy bearer token."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken("dummy-token", 4102444800)


class AzureMLWire(Wire):
    name = "azureml"
    machine = "Standard_NV36ads_A10_v5"
    catalog_key = "azure-ml:NV36ads_A10_v5"
    options: ClassVar[dict[str, Any]] = {"compute": "gpu-a10"}
    identity: ClassVar[tuple[str, ...]] = (
        "subscription 00000000-0000-0000-0000-000000000001",
        "resource group rg",
        "workspace ws",
    )
    image = "azureml:advisor-env:3"  # an inline image is registered first (another wire call)
    refusals: ClassVar[list[tuple[dict[str, Any], str]]] = [
        ({"strategy": "hyperband"}, "does not offer the 'hyperband'"),
        ({"strategy": "grid"}, "grid sampling accepts only choice"),
        ({"alternative_instance_types": ("Standard_NC12",)}, "one compute"),
    ]

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.tracking_uri = ""

    def check_spot(self, request: dict[str, Any]) -> None:
        props = request["properties"]
        assert props["queueSettings"] == {"jobTier": "Spot"}
        assert props["trial"]["command"].count("--checkpoint-dir ${{outputs.checkpoints}}") == 1
        assert props["outputs"]["checkpoints"]["mode"] == "ReadWriteMount"

    def validate(self, request: dict[str, Any]) -> None:
        from advisor.providers.azureml import AzureMLBackend
        from azure.ai.ml.entities import Job
        from azure.ai.ml.sweep import SweepJob

        # The SDK's REST model deserialises the body and loads it back as a sweep job.
        rest_type = type(AzureMLBackend(compute="c").sweep(_any_spec())._to_job()._to_rest_object())
        loaded = Job._from_rest_object(rest_type(request))
        assert isinstance(loaded, SweepJob)
        props = request["properties"]
        assert set(loaded.search_space) == set(props["searchSpace"])
        assert loaded.objective.primary_metric == props["objective"]["primaryMetric"]
        assert loaded.limits.max_total_trials == props["limits"]["maxTotalTrials"]

    def _respond(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        name = path.split("?")[0].split("/")[-1]
        if method == "PUT" and "/jobs/" in path:
            self.jobs[name] = {**body, "id": path.split("?")[0], "name": name}
            self.jobs[name]["properties"]["status"] = "Running"
            return 201, self.jobs[name]
        if method == "GET" and name in self.jobs:
            return 200, self.jobs[name]
        return 404, {"error": {"code": "NotFound", "message": path}}

    @contextmanager
    def connected(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TuningBackend]:
        from advisor.providers.azureml import AzureMLBackend
        from azure.ai.ml import MLClient

        self.tracking_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
        with recording_server(self._respond) as (url, _):
            monkeypatch.setenv("AZUREML_DEV_URL_MFE", url)
            client = MLClient(FakeToken(), subscription_id="00000000-0000-0000-0000-000000000001",
                              resource_group_name="rg", workspace_name="ws")  # fmt: skip
            yield AzureMLBackend(client=client, compute="gpu-a10", tracking_uri=self.tracking_uri)

    def run_trials(self, backend: TuningBackend, sub: Submission, trials: list[Outcome]) -> None:
        import mlflow
        from mlflow.tracking import MlflowClient

        mlflow.set_tracking_uri(self.tracking_uri)
        client = MlflowClient(self.tracking_uri)
        experiment = sub.request["properties"]["experimentName"]
        exp = client.get_experiment_by_name(experiment)
        exp_id = exp.experiment_id if exp else client.create_experiment(experiment)
        start = int(NOW.timestamp() * 1000)
        states = {"completed": "FINISHED", "failed": "FAILED", "stopped": "KILLED",
                  "running": "RUNNING"}  # fmt: skip
        parents = [(sub.job_id, t) for t in trials]
        parents.append((f"{sub.job_id}-2", Outcome("completed", 0.1, "sgd", 0.5, 60.0)))
        for parent, t in parents:
            run = client.create_run(exp_id, start_time=start, tags={"mlflow.parentRunId": parent})
            run_id = run.info.run_id
            for name, value in (("model", "fcn"), ("batch_size", 1024), ("epochs", 20)):
                client.log_param(run_id, name, value)  # as advisor.train logs them
            client.log_param(run_id, "lr", t.lr)
            client.log_param(run_id, "optimizer", t.optimizer)
            if t.metric is not None:
                client.log_metric(run_id, "val_accuracy", t.metric, step=3)
            if t.step_s is not None:
                client.log_metric(run_id, "step_s", t.step_s, step=3)
            if t.status != "running":
                end = start + int(t.runtime_s * 1000)
                client.set_terminated(run_id, status=states[t.status], end_time=end)
        self.jobs[sub.job_id]["properties"]["status"] = "Completed"


def _any_spec() -> Any:
    from advisor.providers.tuning import TuningSpec
    from advisor.search_spaces.space import FloatParam

    return TuningSpec(job_name="x", workload="fcn", image="img", instance_type="Standard_NC6",
                      hyperparameters=(FloatParam("momentum", 0.5, 0.99),))  # fmt: skip


WIRES: dict[str, type[Wire]] = {"sagemaker": SageMakerWire, "vertex": VertexWire,
                                "azureml": AzureMLWire}  # fmt: skip
