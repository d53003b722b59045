"""Why the recommended run, in one line (the report's ``recommended.reason``): the limit it
met, the tie band it was chosen from and exactly which step of the rule took it ("fastest
within USD 5; 9 candidates within 12% of the best time (the band ends in the front's widest
gap between 5 % and 25 %); the cheapest of them taken"; ``tie_words``), and a host-bound
run's warning."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.durations import format_duration
from advisor.evaluation.ranking import TIE_MAX_SHARE, TIE_SHARE, Point, decide
from advisor.report.confidence import decision_steps, tie_words

if TYPE_CHECKING:
    from advisor.outcome import SuggestOutcome


BAND_NOTE = "the band ends in the front's widest gap between 5 % and 25 %"


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
    what = "fastest" if objective == "time" else "cheapest"
    text = f"{what}{limit}"
    decision = decide(points, objective, share, reach)
    if decision is not None:  # issue #50: exactly the steps that took it
        steps = dict(decision_steps(decision, share), objective=objective, tie_share=share)
        text += f"; {tie_words(steps, band_note=BAND_NOTE if reach > TIE_SHARE else '')}"
    neck = best.ref.get("limiting") or ""
    if "host-bound" in neck:
        text = f"{text} (host-bound, so a bigger accelerator does not help)"
    return text
