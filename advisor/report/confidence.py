"""How sure the recommendation is, in plain words: how its time and cost were obtained, how
many candidates are as good within the tie band (and so which rule picked it), and its
interval as a multiple of the estimate.

``confidence(...)`` returns a JSON-able dict for the report (``report["confidence"]``);
``confidence_line`` says it in one sentence ("modelled from this machine's probe by the
performance model; 187 candidates within 5 % of the best time, the cheapest of them chosen;
its time may be 0.45-2.4x the estimate").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from advisor.evaluation.contention import tie_band
from advisor.evaluation.ranking import (
    TIE_MAX_SHARE,
    TIE_RULE,
    TIE_SHARE,
    Point,
    band_edge,
    band_share,
    first_tie_group,
    pareto_set,
    recommended,
)


def confidence(
    points: Sequence[Point],
    best: Point | None,
    objective: str,
    legend: dict[str, str],
    share: float = TIE_SHARE,
    reach: float = TIE_MAX_SHARE,
) -> dict[str, Any] | None:
    """The recommendation's confidence (None without a recommendation): ``how`` it is known
    (the legend's words for its ``known`` key, and its ``source``), ``tied`` (candidates in
    its tie band, itself included), the band's edge (``band``, a share of the best value:
    ``advisor.evaluation.ranking.band_limit``), the ``rule`` that chose among them, and the
    interval of its time and cost as multiples of the estimate (``time_x``, ``cost_x``: [low,
    high]); ``share`` is the other metric's band (issue #36: wider when probes were
    contended), ``reach`` the farthest the band may go."""
    if best is None:
        return None
    row = best.ref
    feasible = [p for p in points if p.feasible]
    band = TIE_SHARE
    if objective == "pareto":
        tied = len(pareto_set(feasible))
        rule = "the knee of the time-cost front (closest to both the fastest and the cheapest)"
    else:
        # the first group decides: its pick, or that pick's machine at a smaller batch
        tied = len(first_tie_group(feasible, objective, reach))
        band = band_share(feasible, objective, reach)
        rule = TIE_RULE[objective] if reach > TIE_SHARE else TIE_RULE["total"]
    known = row.get("known") or ""
    return {
        "how": legend.get(known, row.get("source", "")),
        "known": known,
        "source": row.get("source", ""),
        "tied": tied,
        "tie_share": share,
        "band": round(band, 4),
        "objective": objective,
        "rule": rule,
        "time_x": _ratio(row.get("runtime_s")),
        "cost_x": _ratio(row.get("cost_usd")),
    }


def _ratio(d: dict[str, float] | None) -> list[float] | None:
    if not d or not d.get("value"):
        return None
    return [round(d["low"] / d["value"], 3), round(d["high"] / d["value"], 3)]


# What each way of knowing a time rests on, in a few words (the one-screen report).
SHORT_BASIS = {
    "model": " (this machine's probe, performance model)",
    "here": " (timed on this machine)",
    "probed": " (timed on that machine)",
    "emulated": " (this machine's timings)",
}


def confidence_line(c: dict[str, Any], short: bool = False) -> str:
    """The confidence in one plain sentence (see the module docstring); ``short`` keeps the
    first clause of how it is known and names the tie rule in a few words."""
    how = c["how"] or c["source"]
    if short:  # the row's label ("modelled"), and from what
        how = how.split(":")[0] + SHORT_BASIS.get(c["known"], "")
    parts = [how]
    if c["objective"] == "pareto":
        parts.append(f"{c['tied']} points on the time-cost front; chosen: {c['rule']}")
    else:
        metric = {"time": "time", "total": "total"}.get(c["objective"], "cost")  # total: #37
        band = c.get("band", c["tie_share"])
        if c["tied"] > 1 and short:
            pick = "cheapest" if metric == "time" else "fastest"
            parts.append(
                f"{c['tied']} candidates within {band:.0%} of the best {metric}, the {pick} taken"
            )
        elif c["tied"] > 1:
            parts.append(
                f"{c['tied']} candidates within {band:.0%} of the best {metric}; "
                f"chosen: {c['rule']}"
            )
        else:
            parts.append(f"no other candidate within {band:.0%} of its {metric}")
    ratio = c.get("time_x")
    if ratio:
        lo, hi = ratio
        if c["known"] == "here":
            parts.append(f"its time was measured, within {lo:.2f}-{hi:.2f}x")
        else:
            parts.append(f"its time may be {lo:.2g}-{hi:.2g}x the estimate")
    return "; ".join(parts)


def report_band(evaluations: Any) -> dict[str, Any]:
    """Issue #36: the report's tie band from its screen's evaluations (their local probes),
    ``advisor.evaluation.contention.tie_band``."""
    return tie_band((ev.batch_size, ev.probe) for ev in evaluations if ev.probe is not None)


def edge_section(points: Sequence[Point], objective: str, reach: float) -> dict[str, Any]:
    """Issue #36: where the first tie band ends on the objective's metric and why there
    (``advisor.evaluation.ranking.band_edge``): its edge as a share of the best value, and the
    front's widest and next widest gaps between 5 % and ``reach`` (shares of the best)."""
    feasible = [p for p in points if p.feasible]
    if objective == "pareto" or not feasible:
        return {}
    _, widest, second = band_edge(feasible, objective, reach)
    return {
        "edge": round(band_share(feasible, objective, reach), 4),
        "reach": reach,
        "gap": round(widest, 4),
        "next_gap": round(second, 4),
    }


def quiet_pick(
    points: Sequence[Point],
    objective: str,
    best: Point | None,
    share: float,
    reach: float = TIE_MAX_SHARE,
) -> dict[str, Any] | None:
    """What the quiet machine's bands would take from the same points (the other metric's
    band 5 %; the report's ``tie_band.pick_at_quiet_band``, read by
    ``benchmarks/same_answer.py``)."""
    quiet = best if share == TIE_SHARE else recommended(points, objective, TIE_SHARE, reach)
    if quiet is None:
        return None
    row = quiet.ref
    return {"machine": row["machine"], "batch_size": row["batch_size"],
            "runtime_s": row["runtime_s"]["value"], "cost_usd": row["cost_usd"]["value"]}  # fmt: skip


def same_machine_note(best: Point, group: Sequence[Point], share: float) -> str:
    """Issue #36: the words for a recommendation its machine's smaller batch took over from
    the tie group's pick (``advisor.evaluation.ranking.same_machine_alternatives``); "" when
    it is the group's pick."""
    if any(p is best for p in group):
        return ""
    return (
        f"; then batch {best.ref['batch_size']}, the smallest of its machine's batch sizes "
        f"within {share:.0%} of that pick on time and cost"
    )
