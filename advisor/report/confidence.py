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
    Decision,
    Point,
    band_edge,
    band_share,
    decide,
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
    steps: dict[str, Any] = {"tied": len(pareto_set(feasible)), "band": TIE_SHARE}
    rule = "the knee of the time-cost front (closest to both the fastest and the cheapest)"
    decision = decide(feasible, objective, share, reach)
    if decision is not None:  # the first group decides: the steps that took its pick
        steps = decision_steps(decision, share)
        rule = TIE_RULE[objective] if reach > TIE_SHARE else TIE_RULE["total"]
    known = row.get("known") or ""
    return {
        "how": legend.get(known, row.get("source", "")),
        "known": known,
        "source": row.get("source", ""),
        **steps,
        "tie_share": share,
        "objective": objective,
        "rule": rule,
        "time_x": _ratio(row.get("runtime_s")),
        "cost_x": _ratio(row.get("cost_usd")),
    }


def decision_steps(d: Decision, share: float) -> dict[str, Any]:
    """What took the recommendation (issue #50), as the report's fields: ``tied`` (the first
    tie band's candidates), ``band`` (its edge, a share of the best value), ``decided_by``
    (``Decision.by``), ``key_tied`` (the candidates the stated keys chose among: not beaten
    on both metrics, within ``share`` of the best on the other one), ``beaten`` (the band's
    candidates another beats on both), and ``smaller_batch`` (the group's pick its machine's
    smaller batch took over from, or None)."""
    over = d.group_pick if d.pick is not d.group_pick else None
    return {
        "tied": len(d.group),
        "band": round(d.edge, 6),  # the words round it once, to a whole per cent
        "decided_by": d.by,
        "key_tied": len(d.tied),
        "beaten": d.beaten,
        "smaller_batch": None if over is None else _named(over.ref),
    }


def _named(ref: Any) -> Any:
    """A row's machine and batch size (a plain ref, as the tests' points, as it is)."""
    if isinstance(ref, dict) and "machine" in ref:
        return {"machine": ref["machine"], "batch_size": ref.get("batch_size")}
    return ref


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
        parts.append(tie_words(c, short))
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


# The metric each objective ranks by, and the other one (--value-of-time: a total, #37).
METRICS = {"time": ("time", "cost"), "cost": ("cost", "time"), "total": ("total", "time")}
# What took the pick when the rows the keys chose among were more than one (issue #50).
KEY_WORDS = {
    "price": "the lowest list price per hour",
    "name": "the first by name (equal list prices)",
    "batch": "the smallest batch (one machine)",
}


def tie_words(c: dict[str, Any], short: bool = False, band_note: str = "") -> str:
    """How the tie band and the rule took the recommendation, exactly (issue #50), from the
    report's ``confidence`` fields (``decision_steps``): how many candidates the band held,
    then the step that decided -- the other metric (the cheapest, the fastest), or, when
    several rows no row beats on both metrics tied on it too, the stated key -- and a
    smaller batch of the same machine when one took over; ``band_note``, in brackets after
    the band, says where it ends."""
    metric, other = METRICS.get(c["objective"], METRICS["cost"])
    band, n = c.get("band", c["tie_share"]), c["tied"]
    if n <= 1:
        text = f"no other candidate within {band:.0%} of its {metric}"
    else:
        best = "cheapest" if other == "cost" else "fastest"
        text = f"{n} candidates within {band:.0%} of the best {metric}"
        text += f" ({band_note})" if band_note else ""
        key = KEY_WORDS.get(c.get("decided_by") or "")
        if key is None:
            text += f", the {best} taken" if short else f"; the {best} of them taken"
        else:
            unbeaten = "none beaten" if short else "no candidate beats them"
            text += (
                f"; of the {c['key_tied']} within {c['tie_share']:.0%} of the {best} "
                f"({unbeaten} on both time and {'total' if metric == 'total' else 'cost'}), "
                f"{key} taken"
            )
    over = c.get("smaller_batch")
    if over:
        text += (
            f"; then its machine's smaller batch, within {c['tie_share']:.0%} of that pick "
            "on time and cost and not beaten on both"
        )
    return text
