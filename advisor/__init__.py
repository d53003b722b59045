"""advisor: where and how to train a model, with the time and the money each choice costs.

The Python API (the CLI is a thin layer over it)::

    import advisor
    report = advisor.suggest(model="fcn", budget_usd=5)          # advisor suggest
    forecast = advisor.predict("fcn", 512, ["p3.2xlarge"])        # advisor predict
    spec = advisor.plan_job("sagemaker", study=name)              # advisor submit --dry-run
    submission = advisor.submit_job(spec, "sagemaker")            # advisor submit
    advisor.job_status(submission.job_id, "sagemaker")
    advisor.import_job(submission.job_id, "sagemaker", name)      # import its trials

Importing this package is cheap: each name is imported on first use (module ``__getattr__``),
and no deep-learning framework or cloud SDK is imported until a feature needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError

if TYPE_CHECKING:
    from advisor.options import SuggestOptions
    from advisor.prediction import Prediction, predict
    from advisor.records import TrialRecord
    from advisor.study import suggest
    from advisor.tuning_jobs import import_job, job_status, plan_job, submit_job

__version__ = "0.1.0"

_LAZY = {  # public name -> the module that defines it
    "suggest": "advisor.study",
    "SuggestOptions": "advisor.options",
    "predict": "advisor.prediction",
    "Prediction": "advisor.prediction",
    "TrialRecord": "advisor.records",
    "plan_job": "advisor.tuning_jobs",
    "submit_job": "advisor.tuning_jobs",
    "job_status": "advisor.tuning_jobs",
    "import_job": "advisor.tuning_jobs",
}

__all__ = [
    "AdvisorError",
    "Prediction",
    "SuggestOptions",
    "TrialRecord",
    "__version__",
    "import_job",
    "job_status",
    "plan_job",
    "predict",
    "submit_job",
    "suggest",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'advisor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
