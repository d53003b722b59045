"""The SageMaker SDK (v3) path: the same tuning job as a ``HyperparameterTuner`` built from a
``ModelTrainer``, for users who submit through the SDK rather than boto3."""

from __future__ import annotations

from typing import Any

from advisor.providers.tuning import TuningSpec, metric_definitions
from advisor.search_spaces.space import CategoricalParam, FloatParam

from advisor._lazy import require
from advisor.errors import AdvisorError


def sdk_tuner(
    spec: TuningSpec, role: str, volume_gb: int, output: str, strategy: str, session: Any = None
) -> Any:
    """``spec`` (already checked) as a ``sagemaker.train.tuner.HyperparameterTuner``, writing
    to ``output`` (S3) with SageMaker's name of the ``strategy``."""
    if spec.strategy == "hyperband":
        raise AdvisorError(
            "The SDK tuner path here does not set Hyperband's resource config.",
            "submit Hyperband jobs with `advisor submit` (boto3).",
        )
    train = require("sagemaker.train", "aws", "The SageMaker SDK tuner")
    configs = require("sagemaker.train.configs", "aws", "The SageMaker SDK tuner")
    tuner_mod = require("sagemaker.train.tuner", "aws", "The SageMaker SDK tuner")
    static = spec.static_values()
    trainer = train.ModelTrainer(
        training_image=spec.image,
        role=role,
        sagemaker_session=session,
        compute=configs.Compute(
            instance_type=spec.instance_type,
            instance_count=spec.instance_count,
            volume_size_in_gb=volume_gb,
            enable_managed_spot_training=spec.spot or None,
        ),
        stopping_condition=configs.StoppingCondition(
            max_runtime_in_seconds=spec.max_runtime_s,
            max_wait_time_in_seconds=2 * spec.max_runtime_s if spec.spot else None,
        ),
        output_data_config=configs.OutputDataConfig(s3_output_path=output),
        hyperparameters=static,
        base_job_name=spec.job_name,
        checkpoint_config=configs.CheckpointConfig(s3_uri=f"{output.rstrip('/')}/checkpoints")
        if spec.spot
        else None,
    )
    return tuner_mod.HyperparameterTuner(
        model_trainer=trainer,
        objective_metric_name=spec.objective_metric,
        objective_type=spec.goal.capitalize(),
        metric_definitions=metric_definitions(spec.objective_metric),
        hyperparameter_ranges=sdk_ranges(spec),
        strategy=strategy,
        max_jobs=spec.max_trials,
        max_parallel_jobs=spec.parallel_trials,
        early_stopping_type="Auto" if spec.early_stopping else "Off",
        base_tuning_job_name=spec.job_name,
        warm_start_config=_warm_start(spec),
    )


def _warm_start(spec: TuningSpec) -> Any:
    """The SDK's ``HyperParameterTuningJobWarmStartConfig`` (None without parent jobs)."""
    if not spec.warm_start_parents:
        return None
    shapes = require("sagemaker.core.shapes", "aws", "The SageMaker SDK tuner")
    return shapes.HyperParameterTuningJobWarmStartConfig(
        parent_hyper_parameter_tuning_jobs=[
            shapes.ParentHyperParameterTuningJob(hyper_parameter_tuning_job_name=name)
            for name in spec.warm_start_parents
        ],
        warm_start_type="TransferLearning",
    )


def sdk_ranges(spec: TuningSpec) -> dict[str, Any]:
    """The spec's ranges as ``sagemaker.core.parameter`` objects."""
    par = require("sagemaker.core.parameter", "aws", "The SageMaker SDK tuner")
    out: dict[str, Any] = {}
    for p in spec.hyperparameters:
        if isinstance(p, CategoricalParam):
            out[p.name] = par.CategoricalParameter([str(c) for c in p.choices])
        else:
            cls = par.ContinuousParameter if isinstance(p, FloatParam) else par.IntegerParameter
            out[p.name] = cls(p.low, p.high, scaling_type="Logarithmic" if p.log else "Linear")
    return out
