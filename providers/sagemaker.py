"""SageMaker automatic model tuning: ``CreateHyperParameterTuningJob`` through boto3.

The request is checked against botocore's own service model (enums, name lengths and
patterns, which botocore's client does not check) before it leaves the machine.
``sdk_tuner(spec)`` builds the same job with the ``sagemaker`` SDK's ``HyperparameterTuner``
for users who prefer that path.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any, ClassVar

from advisor.providers import registry
from advisor.providers.aws import aws_error, boto3_client, call, validate_request
from advisor.providers.tuning import (
    STEP_METRIC,
    TrialResult,
    TuningBackend,
    TuningSpec,
    coerce,
    metric_definitions,
)
from advisor.search_spaces.space import CategoricalParam, FloatParam, IntParam

from advisor._lazy import require

STRATEGY = {"bayesian": "Bayesian", "random": "Random", "grid": "Grid", "hyperband": "Hyperband"}
MAX_PARALLEL = 10  # the default account quota of parallel training jobs per tuning job
PLACEHOLDER_ROLE = "arn:aws:iam::000000000000:role/REPLACE-WITH-SAGEMAKER-EXECUTION-ROLE"
PLACEHOLDER_OUTPUT = "s3://REPLACE-WITH-BUCKET/advisor"
_STATUS = {
    "Completed": "completed",
    "InProgress": "running",
    "Failed": "failed",
    "Stopped": "stopped",
    "Stopping": "stopped",
}


class SageMakerBackend(TuningBackend):
    """SageMaker hyperparameter tuning. ``client`` is a boto3 ``sagemaker`` client and ``sts``
    an STS client (both built lazily from the environment when not given); ``role`` is the
    execution role ARN the training jobs assume."""

    name: ClassVar[str] = "sagemaker"
    services: ClassVar[tuple[str, ...]] = registry.get("sagemaker").services
    strategies: ClassVar[tuple[str, ...]] = ("bayesian", "random", "grid", "hyperband")
    max_parallel: ClassVar[int | None] = MAX_PARALLEL
    warm_starts: ClassVar[bool] = True

    def __init__(
        self,
        client: Any = None,
        sts: Any = None,
        role: str | None = None,
        region: str | None = None,
        volume_gb: int = 30,
    ) -> None:
        self._client = client
        self._sts = sts
        self.role = role
        self.region = region
        self.volume_gb = volume_gb

    # -- machine types ------------------------------------------------------------------------
    @classmethod
    def _map_type(cls, service: str, instance_type: str) -> str:
        if service == "ec2":
            return f"ml.{instance_type}"
        return instance_type

    # -- limits -------------------------------------------------------------------------------
    def _refusals(self, spec: TuningSpec) -> Iterable[tuple[str, str]]:
        if spec.strategy == "grid":
            ranged = [p.name for p in spec.hyperparameters if not isinstance(p, CategoricalParam)]
            if ranged:
                yield (
                    f"SageMaker's grid search takes only categorical parameters, "
                    f"but {ranged} are ranges.",
                    "use --strategy bayesian or random, or make them categorical in the space.",
                )
        if spec.strategy == "hyperband":
            if spec.early_stopping:
                yield (
                    "SageMaker's Hyperband stops poor trials itself and refuses "
                    "TrainingJobEarlyStoppingType=Auto.",
                    "drop --early-stopping with --strategy hyperband.",
                )
            if not spec.epochs:
                yield (
                    "Hyperband needs the number of epochs (its resource) and the spec has none.",
                    "pass --epochs N.",
                )
        if spec.early_stopping and spec.strategy == "grid":
            yield ("SageMaker early stopping does not apply to grid search.", "drop it.")
        for p in spec.hyperparameters:
            if isinstance(p, CategoricalParam) and len(p.choices) > 30:
                yield (
                    f"SageMaker allows at most 30 values per categorical range, "
                    f"{p.name} has {len(p.choices)}.",
                    "shorten the list or make it a numeric range.",
                )
        if len(spec.hyperparameters) > 30:
            yield (
                f"SageMaker tunes at most 30 hyperparameters, the spec has "
                f"{len(spec.hyperparameters)}.",
                "fix some with --tune.",
            )

    # -- request ------------------------------------------------------------------------------
    def _build(self, spec: TuningSpec) -> dict[str, Any]:
        config: dict[str, Any] = {
            "Strategy": STRATEGY[spec.strategy],
            "HyperParameterTuningJobObjective": {
                "Type": spec.goal.capitalize(),
                "MetricName": spec.objective_metric,
            },
            "ResourceLimits": {
                "MaxParallelTrainingJobs": spec.parallel_trials,
            },
            "ParameterRanges": parameter_ranges(spec),
            "TrainingJobEarlyStoppingType": "Auto" if spec.early_stopping else "Off",
        }
        if spec.strategy != "grid":  # grid search runs every combination: no count allowed
            config["ResourceLimits"]["MaxNumberOfTrainingJobs"] = spec.max_trials
        if spec.strategy == "hyperband":
            config["StrategyConfig"] = {
                "HyperbandStrategyConfig": {"MinResource": 1, "MaxResource": spec.epochs}
            }
        static = spec.static_values()
        stopping: dict[str, Any] = {"MaxRuntimeInSeconds": spec.max_runtime_s}
        definition: dict[str, Any] = {
            "StaticHyperParameters": static,
            "AlgorithmSpecification": {
                "TrainingImage": spec.image,
                "TrainingInputMode": "File",
                "MetricDefinitions": metric_definitions(spec.objective_metric),
            },
            "RoleArn": self.role or PLACEHOLDER_ROLE,
            "OutputDataConfig": {"S3OutputPath": spec.output or PLACEHOLDER_OUTPUT},
            "StoppingCondition": stopping,
            "EnableManagedSpotTraining": spec.spot,
        }
        if spec.alternative_instance_types:
            definition["HyperParameterTuningResourceConfig"] = {
                "InstanceConfigs": [
                    {
                        "InstanceType": t,
                        "InstanceCount": spec.instance_count,
                        "VolumeSizeInGB": self.volume_gb,
                    }
                    for t in (spec.instance_type, *spec.alternative_instance_types)
                ],
                "AllocationStrategy": "Prioritized",
            }
        else:
            definition["ResourceConfig"] = {
                "InstanceType": spec.instance_type,
                "InstanceCount": spec.instance_count,
                "VolumeSizeInGB": self.volume_gb,
            }
        if spec.spot:
            # Spot capacity can be taken back: wait up to twice the run, resume from checkpoints.
            stopping["MaxWaitTimeInSeconds"] = 2 * spec.max_runtime_s
            out = (spec.output or PLACEHOLDER_OUTPUT).rstrip("/")
            definition["CheckpointConfig"] = {"S3Uri": f"{out}/checkpoints"}
        request = {
            "HyperParameterTuningJobName": spec.job_name,
            "HyperParameterTuningJobConfig": config,
            "TrainingJobDefinition": definition,
            "Tags": [
                {"Key": "advisor:workload", "Value": spec.workload},
                {"Key": "advisor:machine", "Value": spec.machine_key or spec.instance_type},
            ],
        }
        if spec.warm_start_parents:  # issue #29: TransferLearning allows other ranges
            request["WarmStartConfig"] = warm_start_config(spec)
        validate_request("CreateHyperParameterTuningJob", request)
        return request

    # -- cloud calls --------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = boto3_client("sagemaker", self.region)
        return self._client

    def identity(self) -> str:
        sts = self._sts or boto3_client("sts", self.region)
        self._sts = sts
        ident = call(sts.get_caller_identity)
        region = self.client.meta.region_name
        return f"AWS {ident['Arn']} (account {ident['Account']}, region {region})"

    def _submit_refusals(self, spec: TuningSpec) -> Iterable[tuple[str, str]]:
        if not self.role:
            yield (
                "SageMaker needs an execution role for the training jobs.",
                "pass --role arn:aws:iam::<account>:role/<SageMakerExecutionRole>.",
            )

    def _complete(self, spec: TuningSpec) -> TuningSpec:
        if spec.output is not None:
            return spec
        account = call((self._sts or boto3_client("sts", self.region)).get_caller_identity)
        bucket = f"sagemaker-{self.client.meta.region_name}-{account['Account']}"
        return dataclasses.replace(spec, output=f"s3://{bucket}/advisor")

    def _submit(self, spec: TuningSpec, request: dict[str, Any]) -> str:
        call(self.client.create_hyper_parameter_tuning_job, **request)
        return spec.job_name

    def _describe(self, job: str) -> dict[str, Any]:
        out: dict[str, Any] = call(
            self.client.describe_hyper_parameter_tuning_job, HyperParameterTuningJobName=job
        )
        return out

    def _status(self, job: str) -> dict[str, Any]:
        d = self._describe(job)
        best = d.get("BestTrainingJob") or {}
        metric = best.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
        return _jsonable(
            {
                "provider": self.name,
                "job": job,
                "state": d["HyperParameterTuningJobStatus"],
                "trials": d.get("TrainingJobStatusCounters", {}),
                "objectives": d.get("ObjectiveStatusCounters", {}),
                "best_trial": best.get("TrainingJobName"),
                "best_metric": metric.get("Value"),
                "created": d.get("CreationTime"),
                "ended": d.get("HyperParameterTuningEndTime"),
            }
        )

    def _results(self, job: str) -> list[TrialResult]:
        tuning = self._describe(job)
        config = tuning["HyperParameterTuningJobConfig"]
        metric = config["HyperParameterTuningJobObjective"]["MetricName"]
        params = _params_of(config.get("ParameterRanges") or {})
        out = []
        for summary in self._training_jobs(job, tuning["HyperParameterTuningJobArn"]):
            name = summary["TrainingJobName"]
            detail = call(self.client.describe_training_job, TrainingJobName=name)
            raw = summary.get("TunedHyperParameters") or {
                k: v for k, v in (detail.get("HyperParameters") or {}).items() if k in params
            }
            hps = {k: coerce(params[k], v) if k in params else v for k, v in raw.items()}
            final = {
                m.get("MetricName"): m.get("Value") for m in detail.get("FinalMetricDataList") or []
            }
            value = (summary.get("FinalHyperParameterTuningJobObjectiveMetric") or {}).get("Value")
            if value is None:
                value = final.get(metric)
            start, end = detail.get("TrainingStartTime"), detail.get("TrainingEndTime")
            runtime = detail.get("TrainingTimeInSeconds")
            if runtime is None and isinstance(start, datetime) and isinstance(end, datetime):
                runtime = (end - start).total_seconds()
            out.append(
                TrialResult(
                    job_name=name,
                    status=_STATUS.get(detail.get("TrainingJobStatus", ""), "pending"),
                    hyperparameters=hps,
                    metric_name=metric,
                    metric=float(value) if value is not None else None,
                    runtime_s=float(runtime) if runtime is not None else None,
                    billable_s=_float_or_none(detail.get("BillableTimeInSeconds")),
                    instance_type=(detail.get("ResourceConfig") or {}).get("InstanceType"),
                    spot=bool(detail.get("EnableManagedSpotTraining", False)),
                    step_s=_float_or_none(final.get(STEP_METRIC)),
                    static={
                        k: str(v)
                        for k, v in (detail.get("HyperParameters") or {}).items()
                        if k not in params and not k.startswith(("_", "sagemaker_"))
                    },
                )
            )
        return out

    def _training_jobs(self, job: str, arn: str) -> list[dict[str, Any]]:
        """Summaries of the tuning job's training jobs. Uses the dedicated list call; where it
        is unavailable (moto), lists training jobs by name prefix and keeps those whose
        ``TuningJobArn`` is this job (or, without that field, whose name starts with it)."""
        botocore_exc = require("botocore.exceptions", "aws", "SageMaker tuning")
        try:
            pages = self.client.get_paginator(
                "list_training_jobs_for_hyper_parameter_tuning_job"
            ).paginate(HyperParameterTuningJobName=job)
            return [s for page in pages for s in page["TrainingJobSummaries"]]
        except (botocore_exc.ClientError, NotImplementedError) as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
            if code not in ("", "NotImplemented", "InternalFailure", "500"):
                raise aws_error(exc) from exc
        # SageMaker names a tuning job's training jobs <tuning job>-<3 digits>-<8 hex digits>:
        # a job of another tuning job whose name merely starts the same does not match.
        _ours = re.compile(re.escape(job) + r"-\d{3}-[0-9a-f]{8}")
        found = []
        for page in self.client.get_paginator("list_training_jobs").paginate(NameContains=job):
            for s in page["TrainingJobSummaries"]:
                detail = call(
                    self.client.describe_training_job, TrainingJobName=s["TrainingJobName"]
                )
                owner = detail.get("TuningJobArn")
                if owner == arn or (owner is None and _ours.fullmatch(s["TrainingJobName"])):
                    found.append({"TrainingJobName": s["TrainingJobName"]})
        return found

    # -- the sagemaker SDK path ---------------------------------------------------------------
    def sdk_tuner(self, spec: TuningSpec, session: Any = None) -> Any:
        """The same job as a ``sagemaker.train.tuner.HyperparameterTuner`` (SDK v3): call
        ``.tune(wait=False)`` on it to submit through the SDK instead of boto3."""
        from advisor.providers.sagemaker_sdk import sdk_tuner

        self.check(spec)
        return sdk_tuner(
            spec,
            self.role or PLACEHOLDER_ROLE,
            self.volume_gb,
            spec.output or PLACEHOLDER_OUTPUT,
            STRATEGY[spec.strategy],
            session,
        )


def warm_start_config(spec: TuningSpec) -> dict[str, Any]:
    """``WarmStartConfig`` from the spec's parent tuning jobs: ``TransferLearning``, which lets
    the ranges differ from the parents' (``IdenticalDataAndAlgorithm`` also pins the image)."""
    return {
        "ParentHyperParameterTuningJobs": [
            {"HyperParameterTuningJobName": name} for name in spec.warm_start_parents
        ],
        "WarmStartType": "TransferLearning",
    }


def parameter_ranges(spec: TuningSpec) -> dict[str, list[dict[str, Any]]]:
    """SageMaker ``ParameterRanges``: bounds are strings, log ranges scale logarithmically."""
    ranges: dict[str, list[dict[str, Any]]] = {
        "IntegerParameterRanges": [],
        "ContinuousParameterRanges": [],
        "CategoricalParameterRanges": [],
    }
    for p in spec.hyperparameters:
        if isinstance(p, CategoricalParam):
            ranges["CategoricalParameterRanges"].append(
                {"Name": p.name, "Values": [str(c) for c in p.choices]}
            )
            continue
        kind = (
            "ContinuousParameterRanges" if isinstance(p, FloatParam) else "IntegerParameterRanges"
        )
        ranges[kind].append(
            {
                "Name": p.name,
                "MinValue": str(p.low),
                "MaxValue": str(p.high),
                "ScalingType": "Logarithmic" if p.log else "Linear",
            }
        )
    return {k: v for k, v in ranges.items() if v}


def _params_of(ranges: dict[str, Any]) -> dict[str, Any]:
    """Parameter objects rebuilt from a described job's ``ParameterRanges`` (for coercion)."""
    out: dict[str, Any] = {}
    for r in ranges.get("ContinuousParameterRanges", []):
        out[r["Name"]] = FloatParam(r["Name"], float(r["MinValue"]), float(r["MaxValue"]))
    for r in ranges.get("IntegerParameterRanges", []):
        out[r["Name"]] = IntParam(r["Name"], int(r["MinValue"]), int(r["MaxValue"]))
    for r in ranges.get("CategoricalParameterRanges", []):
        out[r["Name"]] = CategoricalParam(r["Name"], tuple(r["Values"]))
    return out


def _float_or_none(value: Any) -> float | None:
    return float(value) if value is not None else None


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in data.items()}
