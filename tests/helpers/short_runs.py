"""A stand-in for ``advisor.probes.accuracy.short_run``: learning curves from a formula, on a
clock the test owns, so the short-run search is tested in milliseconds.

The validation accuracy after ``e`` epochs is ``0.5 + 0.45 q (1 - exp(-e))`` with ``q`` a
bell in ``log(lr / best_lr)`` (best at 0.05 by default) lowered by 10 % per doubling of the
batch size away from 64, plus 0.001 per seed: the best configuration is known.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from advisor.probes.short_run import Check, ShortRunRequest, ShortRunResult


class Clock:
    """A clock the fake trainer advances (``advisor.accuracy.search`` reads it)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        """As ``ReplayClock.advance``: a replayed search may run on this clock too."""
        self.t += seconds


def accuracy(
    hps: dict[str, Any], batch: int, epochs: float, seed: int = 0, best_lr: float = 0.05
) -> float:
    lr = float(hps.get("lr", 0.1))
    quality = math.exp(-((math.log(lr / best_lr)) ** 2)) * (1 - 0.1 * abs(math.log2(batch / 64)))
    return 0.5 + 0.45 * quality * (1 - math.exp(-epochs)) + 0.001 * seed


def fake_trainer(
    clock: Clock,
    per_check_s: float = 1.0,
    build_s: float = 0.5,
    refuse: Callable[[dict[str, Any]], str | None] | None = None,
    diverge: Callable[[dict[str, Any]], bool] | None = None,
    calls: list[ShortRunRequest] | None = None,
) -> Callable[[ShortRunRequest, Callable[[Check], bool]], ShortRunResult]:
    """A trainer taking ``per_check_s`` per check on ``clock``; ``refuse(hps)`` returns a
    message to raise as the builder's ValueError, ``diverge(hps)`` ends the run as failed."""

    def train(req: ShortRunRequest, on_check: Callable[[Check], bool]) -> ShortRunResult:
        if calls is not None:
            calls.append(req)
        start = clock.t
        clock.t += build_s
        if refuse is not None and (why := refuse(req.hyperparameters)):
            raise ValueError(why)
        result = ShortRunResult(build_s=build_s)
        for i in range(1, req.checks + 1):
            clock.t += per_check_s
            if diverge is not None and diverge(req.hyperparameters) and i == 2:
                result.ended, result.error = "failed", "loss diverged: loss became nan"
                break
            epochs = i / req.checks_per_epoch
            acc = accuracy(req.hyperparameters, req.batch_size, epochs, req.seed)
            check = Check(i, epochs, "val_accuracy", acc, 1 - acc, clock.t - start)
            result.checks.append(check)
            if not on_check(check) and i < req.checks:
                result.ended = "stopped"
                break
        result.wall_s = clock.t - start
        return result

    return train


def add_short_runs(study: Any, params: Any, batch: int = 512, budget_s: float = 300.0) -> Any:
    """Short runs of ``suggest --tune`` in ``study`` (the fake trainer, batch ``batch`` and its
    neighbours), with the study attribute ``advisor.pipeline`` leaves; returns the plan."""
    from advisor.accuracy.lr_rule import lr_rule, recipe
    from advisor.accuracy.plan import TunePlan
    from advisor.accuracy.search import ShortRunSearch
    from advisor.accuracy.step import STUDY_ATTR

    plan = TunePlan(
        "fcn", (batch // 2, batch, batch * 2), batch, 8 * batch, 212, 2, 40512,
        estimated_run_s=8.0,
    )  # fmt: skip
    clock = Clock()
    rule = lr_rule("fcn", None, "")
    ShortRunSearch(
        study, plan, list(params), budget_s, rule=rule, recipe=recipe("fcn"),
        train=fake_trainer(clock), clock=clock,
    ).run()  # fmt: skip
    study.set_user_attr(
        STUDY_ATTR, {"plan": plan.to_dict(), "rule": rule.to_dict() if rule else None}
    )
    return plan
