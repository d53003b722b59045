"""What ``advisor submit`` passes on from what the study learnt (issue #29).

From the short runs of ``advisor suggest --tune`` (``advisor.accuracy``): each tuned
hyperparameter's range narrowed to the best quarter of the full-length runs (at least three,
widened by a margin, inside the space's range: ``advisor.accuracy.evidence.narrowed``), and
the best configurations. From the managed jobs imported into the study (``advisor import``): their
tuning jobs, which SageMaker can warm-start from.

What each service takes (checked against each SDK's own request types):

- SageMaker: ``WarmStartConfig`` with ``TransferLearning`` from up to 5 parent tuning jobs (the
  ranges may differ from the parents'); ``CreateHyperParameterTuningJob`` has no field for
  initial configurations, so the best points are not passed.
- Vertex AI: a ``HyperparameterTuningJob``'s ``StudySpec`` takes no initial trials
  (``DoubleValueSpec.default_value`` is documented as "not supported by
  HyperparameterTuningJob"), so only the narrowed ranges go.
- Azure ML: a sweep job takes neither initial points nor a parent job; only the ranges go.

Every note says what was passed on and what was not; ``submit --dry-run`` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from advisor.accuracy.evidence import narrowed, ranked
from advisor.accuracy.plan import TunePlan
from advisor.accuracy.step import STUDY_ATTR
from advisor.accuracy.trials import AccuracyTrial, accuracy_trials
from advisor.records import PROVIDER, TUNING_JOB, is_managed
from advisor.search_spaces.space import CategoricalParam, Param

if TYPE_CHECKING:
    import optuna

MAX_PARENTS = 5  # SageMaker's limit on parent tuning jobs
BEST_POINTS = 3
NOT_TAKEN = {
    "sagemaker": "CreateHyperParameterTuningJob has no field for initial configurations",
    "vertex": "a HyperparameterTuningJob's StudySpec takes no initial trials "
    "(DoubleValueSpec.default_value: 'not supported by HyperparameterTuningJob')",
    "azureml": "an Azure ML sweep job takes no initial configurations",
}


@dataclass(frozen=True)
class WarmStart:
    """What a tuning job starts from: narrowed ranges (by name), the best configurations
    found, parent tuning jobs (SageMaker) and one note per thing passed on or not."""

    ranges: dict[str, Param] = field(default_factory=dict)
    best_points: tuple[dict[str, Any], ...] = ()
    parents: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "ranges": {k: _text(p) for k, p in self.ranges.items()},
            "best_points": list(self.best_points),
            "parents": list(self.parents),
            "notes": list(self.notes),
        }


def warm_start(
    study: optuna.Study, tuned: list[Param], provider: str, batch_size: int | None
) -> WarmStart:
    """The warm start of a ``provider`` job tuning ``tuned`` at ``batch_size`` (see the
    module docstring); an empty one (with a note when useful) when the study learnt nothing."""
    runs = _runs(study, batch_size)
    notes: list[str] = []
    ranges: dict[str, Param] = {}
    points: tuple[dict[str, Any], ...] = ()
    if runs:
        found = narrowed(runs, tuned) or {}
        ranges = {k: p for k, p in found.items() if _text(p) != _text(_by_name(tuned, k))}
        order = ranked(runs)
        names = {p.name for p in tuned}
        points = tuple(
            {k: v for k, v in t.params.items() if k in names} for t in order[:BEST_POINTS]
        )
        at = f"batch {batch_size}" if batch_size else "every batch size"
        changed = ", ".join(
            f"{k} {_text(_by_name(tuned, k))} -> {_text(p)}" for k, p in ranges.items()
        )
        notes.append(
            f"warm start from {len(order)} short runs of advisor suggest --tune ({at}): "
            + (f"ranges narrowed: {changed}" if changed else "no range narrowed (too few runs)")
        )
        if points:
            notes.append(
                f"best configurations not passed on: {NOT_TAKEN.get(provider, 'not supported')}"
                f"; the best was {_point(points[0])}"
            )
    parents = _parents(study, provider)
    if provider == "sagemaker" and parents:
        notes.append(
            f"WarmStartConfig: TransferLearning from parent tuning job(s) {', '.join(parents)} "
            "(imported into the study)"
        )
    elif provider == "sagemaker" and runs:
        notes.append(
            "no WarmStartConfig: the study holds no imported SageMaker tuning job to start from"
        )
    return WarmStart(ranges, points, parents if provider == "sagemaker" else (), tuple(notes))


def apply(tuned: list[Param], start: WarmStart) -> tuple[Param, ...]:
    """``tuned`` with the warm start's narrowed ranges in place of the space's."""
    return tuple(start.ranges.get(p.name, p) for p in tuned)


def _runs(study: optuna.Study, batch_size: int | None) -> list[AccuracyTrial]:
    """The short runs of the study's plan: at ``batch_size`` when at least three full-length
    runs are there, else at every batch size of the plan."""
    stored = study.user_attrs.get(STUDY_ATTR)
    if not isinstance(stored, dict) or "plan" not in stored:
        return []
    runs = accuracy_trials(study, TunePlan.from_dict(stored["plan"]).id)
    at = [t for t in runs if t.batch_size == batch_size]
    finished = [t for t in ranked(at) if t.ended == "finished" and t.role == "search"]
    return at if len(finished) >= 3 else runs


def _parents(study: optuna.Study, provider: str) -> tuple[str, ...]:
    """The managed tuning jobs of ``provider`` imported into the study, newest last."""
    jobs: dict[str, None] = {}
    for t in study.get_trials(deepcopy=False):
        if is_managed(t) and t.user_attrs.get(PROVIDER) == provider:
            name = t.user_attrs.get(TUNING_JOB)
            if name:
                jobs[str(name)] = None
    return tuple(jobs)[-MAX_PARENTS:]


def _by_name(params: list[Param], name: str) -> Param:
    return next(p for p in params if p.name == name)


def _text(p: Param) -> str:
    if isinstance(p, CategoricalParam):
        return "{" + ", ".join(map(str, p.choices)) + "}"
    return f"{p.low:.3g}..{p.high:.3g}" + (" log" if p.log else "")


def _point(values: dict[str, Any]) -> str:
    return " ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items()
    )
