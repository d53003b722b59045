"""Which machine and batch size a tuning job runs on: the one the report recommended.

``advisor suggest`` ranks every scored candidate -- the trials and the screened machine x
batch pairs no trial evaluated -- and saves its recommendation in the study (the attribute
``RECOMMENDATION``: the recommended row and, per service, that service's best row by the
same ranking). ``advisor submit --study`` reads it, so it submits what the report printed. A
study written before the attribute existed falls back to its best trial, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError
from advisor.providers.catalog import MachineKey
from advisor.providers.tuning import provider_for
from advisor.study.selection import recommended_trial

if TYPE_CHECKING:
    import optuna

RECOMMENDATION = "recommendation"
FIELDS = (
    "machine", "batch_size", "epochs", "price_per_hour", "hyperparameters", "trial", "source",
    "training_plan",  # issue #35: the plan the row was predicted under (None: plain fp32)
    "plan", "expected",  # issue #45: the plan in words; what its run should measure
)  # fmt: skip
# Issue #37: what `advisor export --row N` needs of each ranked row (the report's own values).
RANKING_FIELDS = (
    *FIELDS, "provider", "service", "instance_type", "accelerator", "gpus", "region", "spot",
    "runtime_s", "cost_usd", "feasible",
)  # fmt: skip


@dataclass(frozen=True)
class Pick:
    """The machine (catalog key, ``:spot`` included), batch size, epochs, the runtime
    hyperparameters the estimate holds for, and the price per hour it was priced at."""

    machine: str
    batch_size: int | None
    epochs: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    price_per_hour: float | None = None
    notes: tuple[str, ...] = ()
    plan: str | None = None  # issue #35: the training plan as ``--plan`` text (None: plain fp32)
    expected: dict[str, Any] | None = None  # issue #45: what the run should measure

    def __post_init__(self) -> None:
        if not self.machine:
            raise ValueError("a pick needs a machine")


def recommendation_attr(report: dict[str, Any]) -> dict[str, Any] | None:
    """What ``advisor suggest`` saves in the study from its report (None: no recommendation):
    the recommended row and each service's best row, reduced to ``FIELDS``."""
    rec = report.get("recommended")
    if not rec:
        return None
    by_service = {
        service: {k: row.get(k) for k in FIELDS}
        for service, row in (report.get("best_by_service") or {}).items()
    }
    return {
        "recommended": {k: rec.get(k) for k in FIELDS},
        "by_service": by_service,
        "export": {  # issue #37: `advisor export` writes any of these rows
            "workload": report.get("workload"),
            "framework": report.get("framework"),
            "recommended": {k: rec.get(k) for k in RANKING_FIELDS},
            "ranking": [{k: r.get(k) for k in RANKING_FIELDS} for r in report.get("ranking", [])],
        },
    }


def study_pick(study: optuna.Study, services: tuple[str, ...], name: str) -> Pick:
    """The report's recommendation, or (when a back end of ``name`` does not run its machine)
    the report's best machine of ``services``; a study without a saved recommendation falls
    back to its best trial by the same rule."""
    saved = study.user_attrs.get(RECOMMENDATION)
    if not saved:
        return _trial_pick(study, services, name)
    row = saved["recommended"]
    overall = str(row["machine"])
    notes: tuple[str, ...] = ()
    if MachineKey(overall).service not in services:
        found = [saved["by_service"][s] for s in services if s in saved.get("by_service", {})]
        if not found:
            raise AdvisorError(
                f"Study '{study.study_name}' recommends {overall} and ranks no feasible "
                f"{name} machine.",
                f"submit with {provider_for(MachineKey(overall).service)}, or pass "
                f"--instance with a {name} machine type.",
            )
        row = found[0]
        notes = (
            f"the study recommends {overall}, which {name} does not run; this is the "
            f"report's best {name} machine ({row['machine']})",
        )
    return Pick(
        machine=str(row["machine"]),
        batch_size=row.get("batch_size"),
        epochs=row.get("epochs"),
        params=dict(row.get("hyperparameters") or {}),
        price_per_hour=row.get("price_per_hour"),
        notes=notes,
        plan=plan_arg(row.get("training_plan")),
        expected=row.get("expected"),
    )


def _trial_pick(study: optuna.Study, services: tuple[str, ...], name: str) -> Pick:
    trial = recommended_trial(study)
    notes = [
        "this study has no saved recommendation (made before it was kept): its best trial is "
        "used; re-run `advisor suggest` with the same options to submit what its report ranks"
    ]
    if MachineKey(str(trial.params["machine"])).service not in services:
        overall = trial.params["machine"]
        try:
            trial = recommended_trial(study, services)
        except AdvisorError:
            raise AdvisorError(
                f"Study '{study.study_name}' recommends {overall} and has no feasible trial on "
                f"a {name} machine.",
                f"submit with {provider_for(MachineKey(overall).service)}, or pass "
                f"--instance with a {name} machine type.",
            ) from None
        notes.append(
            f"the study recommends {overall}, which {name} does not run; this is the study's "
            f"best {name} machine ({trial.params['machine']})"
        )
    estimate = trial.user_attrs.get("estimate") or {}
    epochs = (
        trial.user_attrs.get("epochs") or estimate.get("epochs") or study.user_attrs.get("epochs")
    )
    batch = trial.params.get("batch_size")
    return Pick(
        machine=str(trial.params["machine"]),
        batch_size=None if batch is None else int(batch),
        epochs=None if not epochs else int(epochs),
        params=dict(trial.params),
        price_per_hour=trial.user_attrs.get("price_per_hour"),
        notes=tuple(notes),
        plan=plan_arg(estimate.get("training_plan")),
        expected=_expected(trial, estimate),
    )


def _expected(trial: Any, estimate: dict[str, Any]) -> dict[str, Any] | None:
    from advisor.records import TrialRecord
    from advisor.report.expected import expected

    rec = TrialRecord.from_trial(trial)
    return expected(estimate, rec.phases if rec is not None else None)


def plan_arg(fields: Any) -> str | None:
    """The ``--plan`` text of a row's ``training_plan`` (None: none, the plain float32 step)."""
    if not isinstance(fields, dict):
        return None
    from advisor.prediction.step.plan import TrainingPlan

    return TrainingPlan.from_dict(fields).arg()
