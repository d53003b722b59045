"""The short accuracy trials of a study, read back from their one attribute
(``advisor.records.ACCURACY``) and their Optuna state.

A trial's attribute holds: ``plan`` (the ``TunePlan.id`` it ran under), ``role`` (``search``:
sampled; ``rule``: the learning-rate rule's starting point; ``seed``: the best configuration
again with another seed), ``seed``, ``metric`` (``val_accuracy`` or ``val_loss``) and
``reported`` (what went to ``trial.report``: the validation error ``1 - val_accuracy``, or the
loss, so that lower is better as the study's direction says), ``curve`` (``[epochs, metric]``
per check), ``ended`` (finished, pruned, time budget, failed, interrupted), ``wall_s``,
``build_s``, ``of`` (for a seed: the trial it repeats) and ``error``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from advisor.records import ACCURACY, is_accuracy_trial

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

ROLES = ("search", "rule", "seed", "backoff")  # backoff: issue #36, advisor.accuracy.collapse
ENDINGS = ("finished", "pruned", "time budget", "failed", "interrupted")
HIGHER_IS_BETTER = {"val_accuracy": True, "val_loss": False}


def reported(metric: str, value: float) -> float:
    """What a check reports to Optuna (lower is better): the error for accuracy, the loss."""
    return 1.0 - value if HIGHER_IS_BETTER.get(metric, False) else value


@dataclass(frozen=True)
class AccuracyTrial:
    """One short run as the study holds it."""

    number: int
    plan: str
    role: str
    seed: int
    batch_size: int
    params: dict[str, Any]  # the hyperparameters it trained with (batch size aside)
    metric: str
    curve: tuple[tuple[float, float], ...]  # (epochs done, metric) per check
    ended: str
    wall_s: float
    of: int | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def checks(self) -> int:
        return len(self.curve)

    @property
    def epochs(self) -> float:
        """Epochs done at its last check (0 when it never reached one)."""
        return self.curve[-1][0] if self.curve else 0.0

    @property
    def value(self) -> float | None:
        """The metric at its last check."""
        return self.curve[-1][1] if self.curve else None

    @property
    def ok(self) -> bool:
        return self.ended not in ("failed", "interrupted") and self.value is not None

    def rank_key(self) -> tuple[float, float]:
        """Sort key, best first: the most checks reached, then the better last value (what
        successive halving promotes on)."""
        v = self.value
        if v is None or not math.isfinite(v):
            return (-self.checks, math.inf)
        return (-self.checks, reported(self.metric, v))


def from_trial(t: FrozenTrial) -> AccuracyTrial | None:
    """The short run ``t`` stored, or None for any other trial."""
    if not is_accuracy_trial(t):
        return None
    a = dict(t.user_attrs[ACCURACY])
    params = {k: v for k, v in t.params.items() if k != "batch_size"}
    return AccuracyTrial(
        number=t.number,
        plan=str(a.get("plan", "")),
        role=str(a.get("role", "search")),
        seed=int(a.get("seed", 0)),
        batch_size=int(t.params.get("batch_size") or a.get("batch_size") or 0),
        params=params,
        metric=str(a.get("metric", "val_accuracy")),
        curve=tuple((float(e), float(v)) for e, v in a.get("curve") or ()),
        ended=str(a.get("ended", "finished")),
        wall_s=float(a.get("wall_s", 0.0)),
        of=None if a.get("of") is None else int(a["of"]),
        error=a.get("error"),
        extra={k: v for k, v in a.items() if k in ("n_train", "n_val", "build_s")},
    )


def accuracy_trials(study: optuna.Study, plan: str | None = None) -> list[AccuracyTrial]:
    """The study's finished short runs (of plan ``plan`` when given), in trial order."""
    out = []
    for t in study.get_trials(deepcopy=False):
        if not t.state.is_finished():
            continue
        a = from_trial(t)
        if a is not None and (plan is None or a.plan == plan):
            out.append(a)
    return out


def spent_s(trials: list[AccuracyTrial]) -> float:
    """This machine's time the short runs took (what ``--tune`` counts)."""
    return sum(t.wall_s for t in trials)
