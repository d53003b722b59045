"""advisor: where and how to train a model, with the time and the money each choice costs.

The Python API (the CLI and the service are thin layers over it)::

    import advisor
    report = advisor.suggest(model="fcn", budget_usd=5)          # advisor suggest
    forecast = advisor.predict("fcn", 512, ["p3.2xlarge"])        # advisor predict
    spec = advisor.plan_job("sagemaker", study=name)              # advisor submit --dry-run
    submission = advisor.submit_job(spec, "sagemaker")            # advisor submit
    advisor.job_status(submission.job_id, "sagemaker")
    advisor.import_job(submission.job_id, "sagemaker", name)      # import its trials
    advisor.export("skypilot", study=name, out="task.yaml")      # advisor export

Importing this package is cheap: each name is imported on first use (module ``__getattr__``,
one explicit import per name), and no deep-learning framework or cloud SDK is imported until
a feature needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError

if TYPE_CHECKING:
    from advisor.evaluation.predict_api import Prediction, predict
    from advisor.export.api import export
    from advisor.options import SuggestOptions
    from advisor.pipeline import suggest
    from advisor.records import TrialRecord
    from advisor.tuning.jobs import import_job, job_status, plan_job, submit_job

__version__ = "0.1.0"

__all__ = [
    "AdvisorError",
    "Prediction",
    "SuggestOptions",
    "TrialRecord",
    "__version__",
    "export",
    "import_job",
    "job_status",
    "plan_job",
    "predict",
    "submit_job",
    "suggest",
]


def __getattr__(name: str) -> Any:
    value = _public(name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def _public(name: str) -> Any:
    """Import the public ``name`` from the module that defines it."""
    if name == "suggest":
        from advisor.pipeline import suggest

        return suggest
    if name == "SuggestOptions":
        from advisor.options import SuggestOptions

        return SuggestOptions
    if name in ("predict", "Prediction"):
        from advisor.evaluation import predict_api

        return getattr(predict_api, name)
    if name == "TrialRecord":
        from advisor.records import TrialRecord

        return TrialRecord
    if name == "export":  # issue #37
        from advisor.export.api import export

        return export
    if name in ("plan_job", "submit_job", "job_status", "import_job"):
        from advisor.tuning import jobs

        return getattr(jobs, name)
    raise AttributeError(f"module 'advisor' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
