"""Why the recommended run, in one line (the report's ``recommended.reason``): the limit it
met, the tie band it was chosen from and by which rule ("fastest within USD 5; the cheapest of
9 candidates within 12 % of the best time (the band ends in the front's widest gap between
5 % and 25 %)"), and a host-bound run's warning."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.durations import format_duration
from advisor.evaluation.ranking import (
    TIE_MAX_SHARE,
    TIE_SHARE,
    Point,
    band_share,
    first_tie_group,
)
from advisor.report.confidence import same_machine_note

if TYPE_CHECKING:
    from advisor.outcome import SuggestOutcome


def why(
    outcome: SuggestOutcome,
    points: list[Point],
    best: Point,
    front: list[Point],
    share: float = TIE_SHARE,
    reach: float = TIE_MAX_SHARE,
) -> str:
    """One line: why ``best`` was chosen from ``points`` (``front``: the reported Pareto set;
    ``share``: the other metric's band; ``reach``: the farthest the tie band may go)."""
    opts, objective = outcome.options, outcome.objective
    if objective == "pareto":
        return (
            f"knee of the time-cost front ({len(front)} points after the {TIE_SHARE:.0%} tie "
            "rule): closest to both the fastest and the cheapest run"
        )
    limit = ""
    if opts.budget_usd is not None:
        limit = f" within USD {opts.budget_usd:g}"
    elif opts.deadline_s is not None:
        limit = f" within {format_duration(opts.deadline_s)}"
    what, other = ("fastest", "time") if objective == "time" else ("cheapest", "cost")
    feasible = [p for p in points if p.feasible]
    group = first_tie_group(feasible, objective, reach)
    text = f"{what}{limit}"
    if len(group) > 1:
        pick = "cheapest" if objective == "time" else "fastest"
        edge = band_share(feasible, objective, reach)
        text += f"; the {pick} of {len(group)} candidates within {edge:.0%} of the best {other}"
        if reach > TIE_SHARE:
            text += " (the band ends in the front's widest gap between 5 % and 25 %)"
    text += same_machine_note(best, group, share)  # issue #36
    neck = best.ref.get("limiting") or ""
    if "host-bound" in neck:
        text = f"{text} (host-bound, so a bigger accelerator does not help)"
    return text
