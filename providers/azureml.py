"""Azure ML sweep jobs: a ``command`` job swept with ``azure.ai.ml.sweep`` distributions and
submitted with ``MLClient.jobs.create_or_update``.

``build_request`` returns the SDK's own REST body (``sweep._to_job()._to_rest_object()``).
Azure's Bayesian sampling accepts only choice / uniform / quniform and no early termination;
the client does not enforce that, so it is enforced here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from typing import Any, ClassVar

from advisor.providers import registry
from advisor.providers.tuning import (
    STEP_METRIC,
    TrialResult,
    TuningBackend,
    TuningSpec,
    int_choices,
)
from advisor.search_spaces.space import CategoricalParam, FloatParam, IntParam, Param

from advisor._lazy import require
from advisor.errors import AdvisorError

SAMPLING = {"bayesian": "bayesian", "random": "random", "grid": "grid"}
PLACEHOLDER_COMPUTE = "REPLACE-WITH-COMPUTE-CLUSTER"
# What advisor.train logs as MLflow params besides the tuned hyperparameters.
_STATIC = ("model", "batch_size", "epochs")
# MLflow run states of sweep trials (an early-terminated trial is cancelled: KILLED).
_RUN_STATUS = {
    "FINISHED": "completed",
    "FAILED": "failed",
    "KILLED": "stopped",
    "RUNNING": "running",
    "SCHEDULED": "pending",
}


class AzureMLBackend(TuningBackend):
    """Azure ML sweep jobs. ``client`` is an ``azure.ai.ml.MLClient`` (built lazily with
    ``DefaultAzureCredential`` for ``subscription`` / ``resource_group`` / ``workspace``, which
    default to AZURE_SUBSCRIPTION_ID / AZURE_RESOURCE_GROUP / AZUREML_WORKSPACE_NAME);
    ``compute`` is the compute cluster the trials run on. ``spec.image`` is a container image
    or an existing environment (``azureml:name:version``)."""

    name: ClassVar[str] = "azureml"
    services: ClassVar[tuple[str, ...]] = registry.get("azureml").services
    strategies: ClassVar[tuple[str, ...]] = ("bayesian", "random", "grid")

    @classmethod
    def _map_type(cls, service: str, instance_type: str) -> str:
        # The catalog lists Azure sizes by their short names (NC6s_v3); Azure ML wants the
        # ARM VM size (Standard_NC6s_v3).
        return (
            instance_type if instance_type.startswith("Standard_") else f"Standard_{instance_type}"
        )

    def __init__(
        self,
        client: Any = None,
        subscription: str | None = None,
        resource_group: str | None = None,
        workspace: str | None = None,
        compute: str | None = None,
        experiment: str | None = None,
        tracking_uri: str | None = None,
    ) -> None:
        self._client = client
        self.subscription = subscription or os.environ.get("AZURE_SUBSCRIPTION_ID")
        self.resource_group = resource_group or os.environ.get("AZURE_RESOURCE_GROUP")
        self.workspace = workspace or os.environ.get("AZUREML_WORKSPACE_NAME")
        self.compute = compute
        self.experiment = experiment
        self.tracking_uri = tracking_uri  # default: the workspace's MLflow tracking URI

    def default_strategy(self, params: Iterable[Param]) -> tuple[str, str | None]:
        log = [p.name for p in params if _distribution_kind(p) in ("loguniform", "qloguniform")]
        if log:
            return "random", (
                f"Azure ML Bayesian sampling has no loguniform ({', '.join(log)}): using random"
            )
        return "bayesian", None

    # -- limits -------------------------------------------------------------------------------
    def _refusals(self, spec: TuningSpec) -> Iterable[tuple[str, str]]:
        if spec.alternative_instance_types:
            yield (
                "An Azure ML sweep runs every trial on one compute cluster (one VM size), but "
                f"{[spec.instance_type, *spec.alternative_instance_types]} were given.",
                "pass a single --instance (or submit one sweep per VM size).",
            )
        if spec.strategy == "bayesian":
            bad = [
                p.name
                for p in spec.hyperparameters
                if _distribution_kind(p) in ("loguniform", "qloguniform")
            ]
            if bad:
                yield (
                    "Azure ML Bayesian sampling accepts only choice, uniform and quniform, "
                    f"but {bad} need loguniform or qloguniform (log-scaled ranges).",
                    "use --strategy random (Azure's loguniform), or make them linear in the space.",
                )
            if spec.early_stopping:
                yield (
                    "Azure ML Bayesian sampling does not support early termination.",
                    "drop --early-stopping, or use --strategy random.",
                )
        if spec.strategy == "grid":
            bad = [p.name for p in spec.hyperparameters if _distribution_kind(p) != "choice"]
            if bad:
                yield (
                    f"Azure ML grid sampling accepts only choice, but {bad} are ranges.",
                    "use --strategy random or bayesian, or list values in the space.",
                )

    # -- request ------------------------------------------------------------------------------
    def sweep(self, spec: TuningSpec) -> Any:
        """The SDK's sweep job for ``spec`` (a swept ``command`` job)."""
        ml = require("azure.ai.ml", "azure", "Azure ML tuning")
        entities = require("azure.ai.ml.entities", "azure", "Azure ML tuning")
        sweep_mod = require("azure.ai.ml.sweep", "azure", "Azure ML tuning")
        fixed = " ".join(spec.entry_args())
        tuned = " ".join(
            f"--{p.name.replace('_', '-')} ${{{{inputs.{p.name}}}}}" for p in spec.hyperparameters
        )
        environment: Any = (
            spec.image
            if spec.image.startswith("azureml:")
            else entities.Environment(image=spec.image)
        )
        compute = self.compute or PLACEHOLDER_COMPUTE
        experiment = self.experiment or f"advisor-{spec.workload}"
        # Each trial checkpoints every epoch into its own job output, mounted read-write, so a
        # trial restarted after losing a spot / low-priority node resumes from it.
        checkpoints = "--checkpoint-dir ${{outputs.checkpoints}}"
        job = ml.command(
            command=f"{' '.join(spec.command)} {fixed} {checkpoints} {tuned}",
            inputs={p.name: _default(p) for p in spec.hyperparameters},
            outputs={"checkpoints": ml.Output(type="uri_folder", mode="rw_mount")},
            environment=environment,
            compute=compute,
            instance_count=spec.instance_count,
            experiment_name=experiment,
            display_name=spec.job_name,
            tags={"advisor:workload": spec.workload, "advisor:vm_size": spec.instance_type},
        )
        swept = job(**{p.name: _distribution(sweep_mod, p) for p in spec.hyperparameters})
        sweep_job = swept.sweep(
            compute=compute,
            sampling_algorithm=SAMPLING[spec.strategy],
            primary_metric=spec.objective_metric,
            goal=spec.goal.capitalize(),
        )
        sweep_job.set_limits(
            max_total_trials=spec.max_trials,
            max_concurrent_trials=spec.parallel_trials,
            trial_timeout=spec.max_runtime_s,
        )
        if spec.early_stopping:
            sweep_job.early_termination = sweep_mod.BanditPolicy(
                slack_factor=0.1, evaluation_interval=1, delay_evaluation=1
            )
        if spec.spot:
            # The job's spot tier (serverless compute); on a named cluster, the cluster's own
            # tier (AmlCompute tier="low_priority") decides.
            sweep_job.queue_settings = entities.QueueSettings(job_tier="spot")
        sweep_job.name = spec.job_name
        sweep_job.display_name = spec.job_name
        sweep_job.experiment_name = experiment  # lost through .sweep()
        sweep_job.tags = {"advisor:workload": spec.workload, "advisor:vm_size": spec.instance_type}
        return sweep_job

    def _build(self, spec: TuningSpec) -> dict[str, Any]:
        sweep_job = self.sweep(spec)
        body: dict[str, Any] = sweep_job._to_job()._to_rest_object().as_dict()
        env = sweep_job.trial.environment if sweep_job.trial is not None else None
        if env is not None and not isinstance(env, str):
            # MLClient registers an inline image as this anonymous environment at submit time.
            body["properties"]["trial"]["environmentId"] = f"azureml:{env.name}:{env.version}"
        return body

    # -- cloud calls --------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            missing = [
                f"--{name.replace(' ', '-')} ({env})" for name, env in unnamed_workspace_parts(self)
            ]
            if missing:
                raise AdvisorError(
                    "The Azure ML workspace is not fully named.", f"pass {', '.join(missing)}."
                )
            ml = require("azure.ai.ml", "azure", "Azure ML tuning")
            identity = require("azure.identity", "azure", "Azure ML tuning")
            self._client = ml.MLClient(
                identity.DefaultAzureCredential(),
                subscription_id=self.subscription,
                resource_group_name=self.resource_group,
                workspace_name=self.workspace,
            )
        return self._client

    def identity(self) -> str:
        c = self.client
        return (
            f"Azure subscription {c.subscription_id}, resource group {c.resource_group_name}, "
            f"workspace {c.workspace_name}"
        )

    def _submit_refusals(self, spec: TuningSpec) -> Iterable[tuple[str, str]]:
        if not self.compute:
            yield (
                f"Azure ML needs a compute cluster to run the sweep on (VM size {spec.instance_type}).",
                "create one with that VM size and pass --compute NAME.",
            )

    def _submit(self, spec: TuningSpec, request: dict[str, Any]) -> str:
        job = _call(self.client.jobs.create_or_update, self.sweep(spec), skip_validation=True)
        return str(job.name)

    def _status(self, job: str) -> dict[str, Any]:
        j = _call(self.client.jobs.get, job)
        counts: dict[str, int] = {}
        try:
            states = [str(run.info.status) for run in self._child_runs(job, j.experiment_name)]
        except AdvisorError:  # no MLflow tracking here: the run history lists the trials
            states = [str(c.status) for c in _call(self.client.jobs.list, parent_job_name=job)]
        for state in states:
            counts[state] = counts.get(state, 0) + 1
        return {
            "provider": self.name,
            "job": j.name,
            "state": j.status,
            "trials": counts,
            "studio_url": getattr(j, "studio_url", None),
        }

    def _results(self, job: str) -> list[TrialResult]:
        """Trials from the workspace's MLflow tracking: each child run's params (logged by
        ``advisor.train``), the primary metric's last value, its run time and state."""
        j = _call(self.client.jobs.get, job)
        metric = j.objective.primary_metric
        tags = j.tags or {}
        spot = (getattr(getattr(j, "queue_settings", None), "job_tier", None) or "").lower()
        out = []
        for run in self._child_runs(job, j.experiment_name):
            value = run.data.metrics.get(metric)
            step_s = run.data.metrics.get(STEP_METRIC)  # logged by advisor.train, last epoch's
            info = run.info
            runtime = (info.end_time - info.start_time) / 1000 if info.end_time else None
            out.append(
                TrialResult(
                    job_name=info.run_id,
                    status=_RUN_STATUS.get(str(info.status), "pending"),
                    hyperparameters={k: v for k, v in run.data.params.items() if k not in _STATIC},
                    metric_name=metric,
                    metric=float(value) if value is not None else None,
                    runtime_s=runtime,
                    instance_type=tags.get("advisor:vm_size"),
                    spot=spot == "spot",
                    static={k: v for k, v in run.data.params.items() if k in _STATIC},
                    step_s=float(step_s) if step_s is not None else None,
                )
            )
        return out

    def _child_runs(self, job: str, experiment: str) -> list[Any]:
        """The sweep's trial runs: MLflow runs whose parent run is the sweep job."""
        mlflow = require("mlflow", "azure", "Reading Azure ML sweep results")
        uri = self.tracking_uri
        if uri is None:
            try:
                import azureml.mlflow  # noqa: F401  (registers the azureml:// tracking scheme)
            except ImportError as exc:
                # Not in the 'azure' extra: azureml-mlflow pins azure-storage-blob and
                # mlflow-skinny below what azure-ai-ml and sagemaker need in one environment.
                raise AdvisorError(
                    "Reading Azure ML sweep trials needs the 'azureml-mlflow' package.",
                    "pip install azureml-mlflow (in an environment without the aws extra).",
                ) from exc
            uri = _call(self.client.workspaces.get, self.client.workspace_name).mlflow_tracking_uri
        mlflow.set_tracking_uri(uri)
        runs: list[Any] = mlflow.search_runs(
            experiment_names=[experiment],
            filter_string=f"tags.mlflow.parentRunId = '{job}'",
            output_format="list",
        )
        return runs


def _distribution_kind(p: Param) -> str:
    if isinstance(p, CategoricalParam):
        return "choice"
    if isinstance(p, IntParam):
        if p.log:  # log-scaled like SageMaker's and Vertex's integer log ranges
            return "qloguniform"
        return "choice" if int_choices(p) is not None else "quniform"
    return "loguniform" if p.log else "uniform"


def _distribution(sweep_mod: Any, p: Param) -> Any:
    kind = _distribution_kind(p)
    if kind == "choice":
        values = list(p.choices) if isinstance(p, CategoricalParam) else int_choices(p)
        return sweep_mod.Choice(values=values)
    assert isinstance(p, FloatParam | IntParam)
    if kind == "uniform":
        return sweep_mod.Uniform(min_value=p.low, max_value=p.high)
    if kind == "quniform":
        return sweep_mod.QUniform(min_value=p.low, max_value=p.high, q=1)
    low, high = math.log(p.low), math.log(p.high)  # Azure's log bounds are natural-log exponents
    if kind == "qloguniform":
        return sweep_mod.QLogUniform(min_value=low, max_value=high, q=1)
    return sweep_mod.LogUniform(min_value=low, max_value=high)


def _default(p: Param) -> Any:
    if isinstance(p, CategoricalParam):
        return p.choices[0]
    return p.low


def unnamed_workspace_parts(names: Any) -> list[tuple[str, str]]:
    """Which of ``names``' subscription, resource group and workspace are missing, each as
    (setting, environment variable), e.g. ``("resource group", "AZURE_RESOURCE_GROUP")``."""
    parts = (
        ("subscription", "AZURE_SUBSCRIPTION_ID", names.subscription),
        ("resource group", "AZURE_RESOURCE_GROUP", names.resource_group),
        ("workspace", "AZUREML_WORKSPACE_NAME", names.workspace),
    )
    return [(name, env) for name, env, value in parts if not value]


def azure_call(fn: Any, *args: Any, feature: str = "Azure ML tuning", **kwargs: Any) -> Any:
    """Call MLClient; authentication and service errors become one-line AdvisorErrors."""
    core = require("azure.core.exceptions", "azure", feature)
    try:
        return fn(*args, **kwargs)
    except core.ClientAuthenticationError as exc:
        raise AdvisorError(
            "Azure refused or found no credentials.",
            "run `az login` (or set AZURE_CLIENT_ID, AZURE_TENANT_ID and a secret/certificate).",
        ) from exc
    except core.HttpResponseError as exc:
        # The service's own message (exc.reason is only the HTTP phrase, "Bad Request").
        error = getattr(exc, "error", None)
        text = " ".join(str(getattr(error, "message", None) or exc.message or exc.reason).split())
        raise AdvisorError(f"Azure ML: {text}", "check the names and values.") from exc


_call = azure_call
