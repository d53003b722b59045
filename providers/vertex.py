"""Vertex AI hyperparameter tuning: a ``HyperparameterTuningJob`` built with
``google.cloud.aiplatform_v1`` types and created with its ``JobServiceClient``.

``build_request`` returns the job exactly as the SDK's REST transport sends it (camelCase JSON;
enums as integers, int64 as strings), so a dry run shows what the service will receive.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from advisor.providers import registry
from advisor.providers.tuning import (
    TrialResult,
    TuningBackend,
    TuningSpec,
    coerce,
    static_from_args,
)
from advisor.search_spaces.space import FloatParam, IntParam, Param

from advisor._lazy import require
from advisor.errors import AdvisorError

if TYPE_CHECKING:
    from advisor.providers.catalog import InstanceType

# Catalog accelerator names (normalised: upper case, no spaces/dashes) -> Vertex enum names.
ACCELERATORS: dict[str, str] = {
    "K80": "NVIDIA_TESLA_K80",
    "P100": "NVIDIA_TESLA_P100",
    "V100": "NVIDIA_TESLA_V100",
    "P4": "NVIDIA_TESLA_P4",
    "T4": "NVIDIA_TESLA_T4",
    "A100": "NVIDIA_TESLA_A100",
    "A10040GB": "NVIDIA_TESLA_A100",
    "A10080GB": "NVIDIA_A100_80GB",
    "L4": "NVIDIA_L4",
    "H100": "NVIDIA_H100_80GB",
    "H10080GB": "NVIDIA_H100_80GB",
    "H100MEGA": "NVIDIA_H100_MEGA_80GB",
    "H100MEGA80GB": "NVIDIA_H100_MEGA_80GB",
    "H200": "NVIDIA_H200_141GB",
    "H200141GB": "NVIDIA_H200_141GB",
    "B200": "NVIDIA_B200",
    "GB200": "NVIDIA_GB200",
    "TPUV2": "TPU_V2",
    "TPUV3": "TPU_V3",
    "TPUV4": "TPU_V4_POD",
    "TPUV5E": "TPU_V5_LITEPOD",
    "TPUV5LITE": "TPU_V5_LITEPOD",
}
ALGORITHM = {"bayesian": "ALGORITHM_UNSPECIFIED", "random": "RANDOM_SEARCH", "grid": "GRID_SEARCH"}
_STATE = {
    "SUCCEEDED": "completed",
    "ACTIVE": "running",
    "REQUESTED": "pending",
    "STOPPING": "stopped",
    "INFEASIBLE": "failed",
}


def accelerator_enum(name: str) -> str:
    """The Vertex ``AcceleratorType`` name of a catalog accelerator name (``V100`` ...)."""
    key = re.sub(r"[^A-Z0-9]", "", name.upper()).removeprefix("NVIDIA").removeprefix("TESLA")
    if key in ACCELERATORS:
        return ACCELERATORS[key]
    raise AdvisorError(
        f"Vertex AI has no accelerator type for '{name}'.",
        f"pick a machine with one of: {', '.join(sorted(set(ACCELERATORS.values())))}.",
    )


class VertexBackend(TuningBackend):
    """Vertex AI hyperparameter tuning jobs. ``client`` is an ``aiplatform_v1.JobServiceClient``
    (built lazily for ``location`` with the environment's credentials when not given)."""

    name: ClassVar[str] = "vertex"
    services: ClassVar[tuple[str, ...]] = registry.get("vertex").services
    strategies: ClassVar[tuple[str, ...]] = ("bayesian", "random", "grid")

    def __init__(
        self,
        client: Any = None,
        project: str | None = None,
        location: str = "us-central1",
        service_account: str | None = None,
        max_failed_trials: int | None = None,
    ) -> None:
        self._client = client
        self.project = project
        self.location = location
        self.service_account = service_account
        self.max_failed_trials = max_failed_trials

    @classmethod
    def _map_type(cls, service: str, instance_type: str) -> str:
        # Catalog rows may spell a GPU VM as "n1-standard-8+V100x1"; Vertex wants the VM part.
        return instance_type.split("+")[0]

    @classmethod
    def same_accelerator(cls, row: InstanceType, result: TrialResult) -> bool:
        if not result.accelerator:
            return row.accelerator is None
        return (
            row.accelerator is not None
            and accelerator_enum(row.accelerator) == result.accelerator
            and row.accelerator_count == result.accelerator_count
        )

    def _refusals(self, spec: TuningSpec) -> Iterable[tuple[str, str]]:
        if spec.alternative_instance_types:
            yield (
                "Vertex AI runs every trial of a tuning job on one machine type, but "
                f"{[spec.instance_type, *spec.alternative_instance_types]} were given.",
                "pass a single --instance (or submit one job per machine type).",
            )
        if spec.strategy == "grid":
            floats = [p.name for p in spec.hyperparameters if isinstance(p, FloatParam)]
            if floats:
                yield (
                    f"Vertex grid search takes only integer, discrete or categorical "
                    f"parameters, but {floats} are continuous.",
                    "use --strategy bayesian or random, or list discrete values in the space.",
                )
        if spec.early_stopping and spec.strategy == "grid":
            yield ("Vertex automated early stopping does not apply to grid search.", "drop it.")
        if spec.device == "tpu":
            yield (
                f"{spec.instance_type} is a TPU machine: advisor.train trains PyTorch on CUDA GPUs "
                "or the CPU, the advisor image has no PyTorch/XLA, and Vertex runs TPU v2/v3 "
                "only as machine type cloud-tpu with 8 cores.",
                "pick a GPU machine type (e.g. --instance a2-highgpu-1g or g2-standard-8), or "
                "build an image on a PyTorch/XLA base and submit the job yourself.",
            )
            return
        if spec.accelerator is not None:
            accelerator_enum(spec.accelerator)  # raises a clear error when unknown
        if spec.spot and spec.output is None:
            yield (
                "A Vertex spot trial resumes after eviction only from checkpoints, and Vertex "
                "gives trials a checkpoint folder (AIP_CHECKPOINT_DIR) only under an output "
                "directory.",
                "pass --output gs://BUCKET/PATH with --spot.",
            )
        if spec.output is not None and not spec.output.startswith("gs://"):
            yield (
                f"Vertex writes output to Cloud Storage, not {spec.output!r}.",
                "pass --output gs://BUCKET/PATH.",
            )

    # -- request ------------------------------------------------------------------------------
    def job(self, spec: TuningSpec) -> Any:
        """The ``aiplatform_v1.HyperparameterTuningJob`` for ``spec``."""
        v1 = _types()
        machine = v1.MachineSpec(machine_type=spec.instance_type)
        if spec.accelerator is not None:
            machine.accelerator_type = v1.AcceleratorType[accelerator_enum(spec.accelerator)]
            machine.accelerator_count = spec.accelerator_count
        container = v1.ContainerSpec(
            image_uri=spec.image, command=list(spec.command), args=spec.entry_args()
        )
        pools = [v1.WorkerPoolSpec(machine_spec=machine, replica_count=1, container_spec=container)]
        if spec.instance_count > 1:  # chief plus workers, same machine type
            pools.append(
                v1.WorkerPoolSpec(
                    machine_spec=machine,
                    replica_count=spec.instance_count - 1,
                    container_spec=container,
                )
            )
        scheduling = v1.Scheduling(timeout={"seconds": spec.max_runtime_s})
        if spec.spot:
            scheduling.strategy = v1.Scheduling.Strategy.SPOT
        custom = v1.CustomJobSpec(worker_pool_specs=pools, scheduling=scheduling)
        if spec.output:
            custom.base_output_directory = v1.GcsDestination(output_uri_prefix=spec.output)
        if self.service_account:
            custom.service_account = self.service_account
        study = v1.StudySpec(
            metrics=[
                v1.StudySpec.MetricSpec(
                    metric_id=spec.objective_metric,
                    goal=v1.StudySpec.MetricSpec.GoalType[spec.goal.upper()],
                )
            ],
            parameters=[_parameter_spec(v1, p) for p in spec.hyperparameters],
            algorithm=v1.StudySpec.Algorithm[ALGORITHM[spec.strategy]],
        )
        if spec.early_stopping:
            study.median_automated_stopping_spec = v1.StudySpec.MedianAutomatedStoppingSpec(
                use_elapsed_duration=False
            )
        job = v1.HyperparameterTuningJob(
            display_name=spec.job_name,
            study_spec=study,
            max_trial_count=spec.max_trials,
            parallel_trial_count=spec.parallel_trials,
            trial_job_spec=custom,
            labels={"advisor-workload": _label(spec.workload)},
        )
        if self.max_failed_trials is not None:
            job.max_failed_trial_count = self.max_failed_trials
        return job

    def _build(self, spec: TuningSpec) -> dict[str, Any]:
        v1 = _types()
        job = self.job(spec)
        text = v1.HyperparameterTuningJob.to_json(
            job, use_integers_for_enums=True, including_default_value_fields=False
        )
        out: dict[str, Any] = json.loads(text)
        return out

    # -- cloud calls --------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            v1 = require("google.cloud.aiplatform_v1", "gcp", "Vertex AI tuning")
            self._credentials()
            self._client = v1.JobServiceClient(
                client_options={"api_endpoint": f"{self.location}-aiplatform.googleapis.com"}
            )
        return self._client

    def _credentials(self) -> Any:
        auth = require("google.auth", "gcp", "Vertex AI tuning")
        exc_mod = require("google.auth.exceptions", "gcp", "Vertex AI tuning")
        try:
            credentials, project = auth.default()
        except exc_mod.DefaultCredentialsError as exc:
            raise AdvisorError(
                "No Google Cloud credentials found.",
                "run `gcloud auth application-default login` or set "
                "GOOGLE_APPLICATION_CREDENTIALS to a key file path.",
            ) from exc
        if self.project is None:
            self.project = project
        return credentials

    @property
    def parent(self) -> str:
        if not self.project:
            raise AdvisorError(
                "No Google Cloud project is set.",
                "pass --project or run `gcloud config set project`.",
            )
        return f"projects/{self.project}/locations/{self.location}"

    def identity(self) -> str:
        account = None
        if self._client is None:
            account = getattr(self._credentials(), "service_account_email", None)
        who = f", as {account}" if account and account != "default" else ""
        return f"Google Cloud project {self.project}, location {self.location}{who}"

    def _submit(self, spec: TuningSpec, request: dict[str, Any]) -> str:
        created = _call(
            self.client.create_hyperparameter_tuning_job,
            parent=self.parent,
            hyperparameter_tuning_job=self.job(spec),
        )
        return str(created.name)

    def _get(self, job: str) -> Any:
        name = (
            job if job.startswith("projects/") else f"{self.parent}/hyperparameterTuningJobs/{job}"
        )
        return _call(self.client.get_hyperparameter_tuning_job, name=name)

    def _status(self, job: str) -> dict[str, Any]:
        j = self._get(job)
        counts: dict[str, int] = {}
        for t in j.trials:
            counts[t.state.name] = counts.get(t.state.name, 0) + 1
        return {
            "provider": self.name,
            "job": j.name,
            "state": j.state.name,
            "trials": counts,
            "max_trials": j.max_trial_count,
            "error": j.error.message or None,
        }

    def _results(self, job: str) -> list[TrialResult]:
        j = self._get(job)
        metric = j.study_spec.metrics[0].metric_id
        params = {p.parameter_id: p for p in j.study_spec.parameters}
        machine = j.trial_job_spec.worker_pool_specs[0].machine_spec
        spot = j.trial_job_spec.scheduling.strategy.name == "SPOT"
        container = j.trial_job_spec.worker_pool_specs[0].container_spec
        static = static_from_args(container.args)
        out = []
        for t in j.trials:
            hps = {}
            for pv in t.parameters:
                value = pv.value
                spec = params.get(pv.parameter_id)
                if spec is not None and "integer_value_spec" in spec:
                    value = round(float(value))
                hps[pv.parameter_id] = value
            value_m = None
            if t.final_measurement:
                for m in t.final_measurement.metrics:
                    if m.metric_id == metric:
                        value_m = float(m.value)
            runtime = None
            if t.start_time and t.end_time:
                runtime = (t.end_time - t.start_time).total_seconds()
            out.append(
                TrialResult(
                    job_name=f"{j.name}/trials/{t.id}",
                    accelerator=machine.accelerator_type.name
                    if machine.accelerator_count
                    else None,
                    accelerator_count=machine.accelerator_count,
                    spot=spot,
                    static=static,
                    status=_STATE.get(t.state.name, "pending"),
                    hyperparameters=hps,
                    metric_name=metric,
                    metric=value_m,
                    runtime_s=runtime,
                    instance_type=machine.machine_type,
                    # step_s stays None: a Vertex trial's measurement holds only the study's
                    # (objective) metrics, so the measured step time does not come back.
                )
            )
        return out


def _parameter_spec(v1: Any, p: Param) -> Any:
    scale = v1.StudySpec.ParameterSpec.ScaleType
    spec = v1.StudySpec.ParameterSpec(parameter_id=p.name)
    if isinstance(p, FloatParam):
        spec.double_value_spec = v1.StudySpec.ParameterSpec.DoubleValueSpec(
            min_value=p.low, max_value=p.high
        )
        spec.scale_type = scale.UNIT_LOG_SCALE if p.log else scale.UNIT_LINEAR_SCALE
    elif isinstance(p, IntParam):
        spec.integer_value_spec = v1.StudySpec.ParameterSpec.IntegerValueSpec(
            min_value=p.low, max_value=p.high
        )
        spec.scale_type = scale.UNIT_LOG_SCALE if p.log else scale.UNIT_LINEAR_SCALE
    elif all(isinstance(c, int | float) and not isinstance(c, bool) for c in p.choices):
        spec.discrete_value_spec = v1.StudySpec.ParameterSpec.DiscreteValueSpec(
            values=sorted(float(c) for c in p.choices)
        )
    else:
        spec.categorical_value_spec = v1.StudySpec.ParameterSpec.CategoricalValueSpec(
            values=[str(c) for c in p.choices]
        )
    return spec


def _label(value: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "-", value.lower())[:63]


def _types() -> Any:
    return require("google.cloud.aiplatform_v1", "gcp", "Vertex AI tuning")


def vertex_call(fn: Any, feature: str = "Vertex AI tuning", **kwargs: Any) -> Any:
    """Call a Vertex client method; auth and API errors become one-line AdvisorErrors
    (``feature`` names what needed the call, for the missing-extra message)."""
    core = require("google.api_core.exceptions", "gcp", feature)
    auth_exc = require("google.auth.exceptions", "gcp", feature)
    try:
        return fn(**kwargs)
    except auth_exc.DefaultCredentialsError as exc:
        raise AdvisorError(
            "No Google Cloud credentials found.",
            "run `gcloud auth application-default login`.",
        ) from exc
    # gRPC says Unauthenticated / PermissionDenied; the REST transport, Unauthorized / Forbidden.
    except (core.Unauthenticated, core.PermissionDenied, core.Unauthorized, core.Forbidden) as exc:
        raise AdvisorError(
            f"Vertex AI refused the request ({type(exc).__name__}: {exc.message}).",
            "check the project and that your account has the Vertex AI User role.",
        ) from exc
    except core.GoogleAPICallError as exc:
        raise AdvisorError(f"Vertex AI: {exc.message}", "check the names and values.") from exc


_call = vertex_call


__all__ = ["ACCELERATORS", "VertexBackend", "accelerator_enum", "coerce", "vertex_call"]
