"""How ``advisor.train`` reports (``advisor.train.entry``): after every epoch, the metrics in
the form each service reads -- a log line ``advisor-metric: val_accuracy=0.9123;`` on stdout
(SageMaker's metric regex, ``advisor.providers.tuning.metric_regex``), Vertex AI's
hyperparameter-tuning report (``hypertune``, or the JSON line it writes to
``$CLOUD_ML_HP_METRIC_FILE``), ``mlflow.log_metric`` when a tracking run is configured (Azure
ML) -- and, at the end, the run's measured figures beside the report's (``final``).
"""

from __future__ import annotations

import collections
import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from advisor.providers.tuning import METRIC_LINE

HYPERTUNE_FILE = "/tmp/hypertune/output.metrics"


class Reporter:
    """Reports each epoch's metrics to stdout, Vertex (hypertune) and MLflow (Azure ML)."""

    def __init__(self, objective: str, out: Callable[[str], None] | None = None) -> None:
        self.objective = objective
        self.out = out or (lambda line: print(line, flush=True))
        self._hypertune = _hypertune()
        self._history: collections.deque[dict[str, Any]] = collections.deque(maxlen=100)
        self._mlflow = _mlflow(self.out)

    def params(self, values: dict[str, Any]) -> None:
        """Log the run's parameters to MLflow (Azure ML imports read them back)."""
        if self._mlflow is not None:
            self._mlflow.log_params({k: str(v) for k, v in values.items()})

    def __call__(self, epoch: int, metrics: dict[str, float]) -> None:
        step = epoch + 1
        for name, value in metrics.items():
            if isinstance(value, int | float) and math.isfinite(value):
                self.out(METRIC_LINE.format(name=name, value=value))
        objective = metrics.get(self.objective)
        if objective is not None and math.isfinite(objective):
            self._vertex(objective, step)
        if self._mlflow is not None:
            self._mlflow.log_metrics(
                {k: float(v) for k, v in metrics.items() if math.isfinite(v)}, step=step
            )

    def final(self, metrics: dict[str, float]) -> None:
        """The run's closing figures (issue #45: measured peak memory and steady step) as
        metric lines and MLflow metrics; not the objective, so not to Vertex."""
        finite = {k: float(v) for k, v in metrics.items() if math.isfinite(v)}
        for name, value in finite.items():
            self.out(METRIC_LINE.format(name=name, value=value))
        if self._mlflow is not None and finite:
            self._mlflow.log_metrics(finite)

    def _vertex(self, value: float, step: int) -> None:
        if self._hypertune is not None:
            self._hypertune.report_hyperparameter_tuning_metric(
                hyperparameter_metric_tag=self.objective, metric_value=value, global_step=step
            )
            return
        path = os.environ.get("CLOUD_ML_HP_METRIC_FILE")
        if path is None and "CLOUD_ML_TRIAL_ID" not in os.environ:
            return  # not in a Vertex trial: nothing reads the file
        path = path or HYPERTUNE_FILE
        # The same record and file layout cloudml-hypertune writes (whole file, last 100).
        self._history.append(
            {
                "timestamp": time.time(),
                "trial": str(os.environ.get("CLOUD_ML_TRIAL_ID", 0)),
                self.objective: str(float(value)),
                "global_step": str(step),
            }
        )
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as fh:
            for record in self._history:
                fh.write(json.dumps(record, sort_keys=True) + "\n")


def _hypertune() -> Any:
    try:
        import hypertune
    except ImportError:
        return None
    return hypertune.HyperTune()


def _mlflow(out: Callable[[str], None]) -> Any:
    """MLflow, only when a tracking run is configured (Azure ML sets MLFLOW_RUN_ID and an
    ``azureml://`` MLFLOW_TRACKING_URI, which needs the ``azureml-mlflow`` plugin)."""
    if not (os.environ.get("MLFLOW_RUN_ID") or os.environ.get("AZUREML_RUN_ID")):
        return None
    try:
        import mlflow
    except ImportError:
        out("advisor-train: warning: MLflow run configured but mlflow is not installed")
        return None
    uri = os.environ.get("MLFLOW_TRACKING_URI", "")
    if uri.startswith("azureml:"):
        import importlib.util

        if importlib.util.find_spec("azureml") is None or (
            importlib.util.find_spec("azureml.mlflow") is None
        ):
            out(
                "advisor-train: warning: azureml:// tracking needs azureml-mlflow (in the "
                "advisor image); metrics are not sent to MLflow"
            )
            return None
    return mlflow
