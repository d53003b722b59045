"""The screen-guided planner: which (machine, batch size) a trial evaluates next.

The screen predicts every (machine, batch) with an interval. The planner ranks them best-first
by predicted value and, each trial, returns the first one whose optimistic bound (interval low
end) could still beat the best result so far and whose probe fits what is left of the probe
budget; None with the reason ("converged", "probe budget spent") when none is left.

Issue #27: when a trial repeats its screen (``Backend.trials_repeat_screen``: the local back
end without runtime hyperparameters -- the cached probe and the same model give the same
values), evaluating a configuration reveals nothing its prediction did not say, so the
optimistic bound is not a reason to try it. The planner then walks the screen in the report's
own ranking order (``advisor.evaluation.ranking.rank``: feasible first, the tie rule) and
stops ("converged") once the best configuration tried so far is the first feasible one left
in that order: nothing below it could become the recommendation. For a Pareto search it tries
the points of the predicted front. The probe budget is no stop rule there: those trials
charge nothing (only remote probes that ran are charged).
"""

from __future__ import annotations

import dataclasses
import math

from advisor.evaluation.contract import Evaluation, Scored
from advisor.evaluation.ranking import Point, dominates, rank
from advisor.options import SuggestOptions, is_feasible
from advisor.outcome import StopReason
from advisor.providers.catalog import MachineKey


def affordable(
    key: tuple[str, int], pred: Scored, charged: set[tuple[str, int]], left_usd: float
) -> bool:
    """Whether evaluating ``key`` fits the probe budget: its probe is already paid for (same
    machine and batch, on demand or spot), free (this machine), or costs at most what is left."""
    base = (MachineKey(key[0]).base, key[1])
    cost = pred.probe_cost_usd
    return base in charged or cost <= 0 or cost <= left_usd + 1e-12


class Planner:
    """Best-first choice of (machine, batch) from the screen, with an optimistic stop rule."""

    def __init__(
        self,
        objective: str,
        options: SuggestOptions,
        screen: dict[tuple[str, int], Scored],
        trials_repeat_screen: bool = False,
    ) -> None:
        self.objective = objective
        self.options = options
        self.screen = {k: v for k, v in screen.items() if isinstance(v, Evaluation)}
        self.repeat = trials_repeat_screen
        if self.repeat:  # a trial gives its prediction: the report's ranking, feasible only
            self._order = self._report_order()
            return
        ranks = self._rank_all()  # the screen is fixed: rank and filter it once
        self._order = sorted(
            (k for k, v in self.screen.items() if is_feasible(options, v, optimistic=True)),
            key=lambda k: (ranks[k], k),
        )

    def _report_order(self) -> list[tuple[str, int]]:
        """The screened configs that meet the limits at their predicted values, in the
        report's ranking order (ties broken by key, as the study's records would be)."""
        points = [
            _point(key, ev)
            for key, ev in sorted(self.screen.items())
            if is_feasible(self.options, ev)
        ]
        return [p.ref for p in rank(points, self.objective)] if points else []

    @property
    def order(self) -> list[tuple[str, int]]:
        """The screened configs that could meet the limits, best first."""
        return list(self._order)

    def _value(self, ev: Evaluation, optimistic: bool) -> float:
        assert ev.runtime is not None and ev.cost is not None
        iv = ev.runtime if self.objective == "time" else ev.cost
        return iv.low if optimistic else iv.value

    def next(
        self,
        done: dict[tuple[str, int], Scored],
        charged: set[tuple[str, int]],
        left_usd: float,
        busy: frozenset[tuple[str, int]] | set[tuple[str, int]] = frozenset(),
    ) -> tuple[str, int] | StopReason:
        """The next config to evaluate, or why there is none. ``busy``: configs another
        process is evaluating now (skipped, not counted as done). A probe already paid for
        (its machine and batch in ``charged``) or free (this machine: price 0) always fits."""
        feasible_done = [
            e for e in done.values() if isinstance(e, Evaluation) and is_feasible(self.options, e)
        ]
        incumbent = min((self._value(e, False) for e in feasible_done), default=math.inf)
        unaffordable = 0
        for key in self._order:  # best first: the first one left is the answer
            pred = self.screen[key]
            if self.repeat and self.objective != "pareto" and _met(done.get(key), self.options):
                break  # the best tried so far ranks above everything left: converged
            if key in done or key in busy:
                continue
            if not self._could_improve(pred, feasible_done, incumbent):
                continue
            if not affordable(key, pred, charged, left_usd):
                unaffordable += 1
                continue
            return key
        return StopReason.PROBE_BUDGET if unaffordable else StopReason.CONVERGED

    def _could_improve(self, pred: Evaluation, best: list[Evaluation], incumbent: float) -> bool:
        if not best:
            return True
        if self.repeat:  # ranked above every trial (the loop's break), or a front point
            if self.objective != "pareto":
                return True
            point = (pred.runtime.value, pred.cost.value)
            return not any(
                dominates((e.runtime.value, e.cost.value), point)
                or (e.runtime.value, e.cost.value) == point
                for e in best
            )
        if self.objective == "pareto":
            point = (pred.runtime.low, pred.cost.low)
            return not any(
                dominates((e.runtime.value, e.cost.value), point)
                or (e.runtime.value, e.cost.value) == point
                for e in best
            )
        return self._value(pred, True) < incumbent

    def _rank_all(self) -> dict[tuple[str, int], float]:
        """Best-first order: the objective's predicted value; for a Pareto search, points on
        the predicted front first (by how many predicted points dominate them), then by the
        product time x cost."""
        keys = list(self.screen)
        if self.objective != "pareto":
            return {k: self._value(self.screen[k], False) for k in keys}
        import numpy as np

        pts = np.array([(e.runtime.value, e.cost.value) for e in self.screen.values()])
        if not len(pts):
            return {}
        le = (pts[:, None, :] <= pts[None, :, :]).all(axis=2)  # le[i, j]: i is no worse than j
        eq = (pts[:, None, :] == pts[None, :, :]).all(axis=2)
        dominated_by = (le & ~eq).sum(axis=0)
        score = dominated_by * 1e30 + pts[:, 0] * pts[:, 1]
        return dict(zip(keys, score.tolist(), strict=True))


def _point(key: tuple[str, int], ev: Evaluation) -> Point:
    """A screened config as the report ranks its row: with the tie-break the report's rows
    carry (list price, machine, batch; issue #28) where ``Point`` has one."""
    point = Point(ev.runtime.value, ev.cost.value, True, key)
    if "tiebreak" in {f.name for f in dataclasses.fields(Point)}:
        point = dataclasses.replace(point, tiebreak=(ev.price_per_hour, key[0], key[1]))
    return point


def _met(ev: Scored | None, options: SuggestOptions) -> bool:
    """Whether ``ev`` is a finished evaluation that meets the limits."""
    return isinstance(ev, Evaluation) and is_feasible(options, ev)
