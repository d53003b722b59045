"""How ``--tune``'s short runs spend their budget: what one call did, the time kept for the
seed repeats of the best run, and why the search stopped (issue #50: ``--tune 3m`` ended after
one run with most of its time unspent and did not say why).

The search runs while what is left, less the seeds' reserve, still buys a search run's first
check; the reserve is as many seed repeats of the best full-length run as still fit (none when
none does: then the search runs use the time to its end, the last cut at the budget).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from advisor.accuracy.plan import TunePlan
from advisor.durations import format_duration

BUILD_PRIOR_S = 2.0  # building a workload's setup before the first run measured it (a prior)
SEED_MARGIN = 1.1  # a seed repeat starts when 1.1x the longest full-length run is left
SLOWER_THAN_PLANNED = 2.0  # a full run this many times the plan's estimate is worth saying


@dataclass
class SearchResult:
    """What one call of the search did, and why it stopped."""

    budget_s: float
    spent_before_s: float
    spent_s: float = 0.0
    endings: Counter[str] = field(default_factory=Counter)
    new: int = 0
    left_s: float = 0.0  # of the budget, when it stopped
    stop: str = ""  # why it stopped, in words

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_s": round(self.budget_s, 1),
            "spent_before_s": round(self.spent_before_s, 1),
            "spent_now_s": round(self.spent_s, 1),
            "left_s": round(self.left_s, 1),
            "new_runs": self.new,
            "new_by_ending": dict(self.endings),
            "stop": self.stop,
        }


def seed_reserve(full_run_s: float, replicates: int, left_s: float) -> float:
    """Seconds kept for the seed repeats: as many as fit in ``left_s`` (at most
    ``replicates``), each ``SEED_MARGIN`` x the longest full-length run."""
    one = SEED_MARGIN * full_run_s
    if one <= 0:
        return 0.0
    return min(replicates, int(max(0.0, left_s) // one)) * one


def stop_text(
    result: SearchResult,
    first_check_s: float,
    seed_s: float | None,
    full_run_s: float | None,
    plan: TunePlan,
) -> str:
    """Why the search stopped with ``result.left_s`` left: its time used (what is left buys
    neither a search run's first check nor a seed repeat, ``seed_s``), or nothing to do; and
    when a full-length run took far longer than the plan expected, that fewer runs fit."""
    if result.budget_s - result.spent_before_s <= first_check_s and result.new == 0:
        return (
            f"no new run: the study's short runs had used {format_duration(result.spent_before_s)}"
            f" of --tune {format_duration(result.budget_s)} (a longer --tune goes on from them)"
        )
    why = f"a search run's first check takes {format_duration(first_check_s)}"
    if seed_s is not None:
        why += f", a seed repeat {format_duration(seed_s)}"
    planned_s, basis = plan.estimated_run_s, plan.basis
    text = f"used its time: {format_duration(result.left_s)} left ({why})"
    if full_run_s is not None and planned_s > 0 and full_run_s > SLOWER_THAN_PLANNED * planned_s:
        text += (
            f"; a full-length short run took {format_duration(full_run_s)} here where the plan "
            f"expected {format_duration(planned_s)} (from {basis or 'the measured cost'}), so "
            "fewer runs fit"
        )
    return text
