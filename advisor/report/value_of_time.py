"""Issue #37: a price on time. With ``--value-of-time V`` (USD per hour) the report ranks every
candidate by its total, cloud cost + run time x V, with the same tie rule as a cost ranking (a
total within 5 % of the best ties; the faster of those is taken); ``--budget`` and
``--deadline`` stay limits. The report shows the recommendation's split (cloud bill, value of
the time), the fastest and cheapest runs' totals beside it, where it sits on the time-cost
front, and the range of values of time for which it stays the front's best (the front's
neighbouring slopes, USD per hour saved)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from advisor.durations import format_duration
from advisor.evaluation.ranking import Point, cheapest, fastest, non_dominated


def total(row: dict[str, Any], usd_per_hour: float) -> dict[str, float]:
    """The row's total, cost + run time x value, with its interval (both ends together)."""
    rt, cost = row["runtime_s"], row["cost_usd"]
    return {key: cost[key] + rt[key] / 3600.0 * usd_per_hour for key in ("value", "low", "high")}


def total_points(rows: Sequence[dict[str, Any]], usd_per_hour: float) -> list[Point]:
    """The rows as points whose cost is their total: ranked with objective "cost", they rank
    by the total, and a tie is decided by the run time."""
    return [
        Point(
            r["runtime_s"]["value"],
            total(r, usd_per_hour)["value"],
            r["feasible"],
            r,
            tiebreak=(r.get("price_per_hour") or 0.0, r["machine"], r["batch_size"]),
        )
        for r in rows
    ]


def _split(row: dict[str, Any], v: float) -> dict[str, Any]:
    cost = row["cost_usd"]["value"]
    hours = row["runtime_s"]["value"] / 3600.0
    return {
        "machine": row["machine"],
        "batch_size": row["batch_size"],
        "runtime_s": row["runtime_s"]["value"],
        "cost_usd": cost,
        "time_usd": hours * v,
        "total_usd": cost + hours * v,
    }


def section(points: Sequence[Point], best: Point | None, usd_per_hour: float) -> dict[str, Any]:
    """The report's ``value_of_time`` section (``points``: run time and cloud cost)."""
    v = usd_per_hour
    out: dict[str, Any] = {
        "usd_per_hour": v,
        "objective": "cost + run time x value of time",
        "recommended": None if best is None else _split(best.ref, v),
    }
    fast, cheap = fastest(points), cheapest(points)
    out["fastest"] = None if fast is None else _split(fast.ref, v)
    out["cheapest"] = None if cheap is None else _split(cheap.ref, v)
    if best is None:
        return out
    front = non_dominated([p for p in points if p.feasible])
    # issue #50: the tie rule takes no row another beats on both time and total, so none
    # another beats on both time and cost: the choice is on the front (or equal to a point
    # of it, which ``non_dominated`` keeps one of)
    real = next(p for p in points if p.ref is best.ref)  # ``best`` holds the total
    pair = (real.runtime, real.cost)
    on = next((i for i, p in enumerate(front) if (p.runtime, p.cost) == pair), None)
    if on is None:  # only when two totals round to one float: say so, claim no place
        out["front"] = {"on_front": False, "points": len(front), "text": "off the front"}
        return out
    # Front sorted by run time (cost falling): point i is the best total for V between the
    # slopes to its neighbours, USD saved per hour of run time.
    lo = _slope(front[on], front[on + 1]) if on + 1 < len(front) else 0.0
    hi = _slope(front[on - 1], front[on]) if on > 0 else None
    out["front"] = {
        "on_front": True,
        "position": on + 1,
        "points": len(front),
        "best_for_usd_per_hour": [round(lo, 4), None if hi is None else round(hi, 4)],
        "text": _where(on, len(front), lo, hi),
    }
    return out


def _slope(faster: Point, slower: Point) -> float:
    """USD per hour at which two front points' totals are equal."""
    dt_h = (slower.runtime - faster.runtime) / 3600.0
    return (faster.cost - slower.cost) / dt_h if dt_h > 0 else 0.0


def _where(on: int, n: int, lo: float, hi: float | None) -> str:
    place = (
        "the fastest end"
        if on == 0
        else "the cheapest end"
        if on == n - 1
        else f"point {on + 1} of {n} from the fastest"
    )
    upto = "any higher value" if hi is None else f"USD {hi:,.2f}/h"
    return (
        f"{place} of the time-cost front ({n} points); it stays the best total for a value of "
        f"time from USD {lo:,.2f}/h to {upto}"
    )


def reason(section: dict[str, Any]) -> str:
    """The recommendation's one-line reason."""
    r = section["recommended"]
    return (
        f"least cost + time x USD {section['usd_per_hour']:g}/h: USD {r['total_usd']:,.2f} "
        f"(cloud USD {r['cost_usd']:,.2f} + time USD {r['time_usd']:,.2f})"
    )


def lines(report: dict[str, Any]) -> list[str]:
    """What the rendered report says of it (no section: nothing)."""
    s = report.get("value_of_time")
    if not s or not s.get("recommended"):
        return []
    v, r = s["usd_per_hour"], s["recommended"]
    out = [
        f"Value of time USD {v:g}/h: total USD {r['total_usd']:,.2f} = cloud USD "
        f"{r['cost_usd']:,.2f} + {format_duration(r['runtime_s'])} x USD {v:g}/h = USD "
        f"{r['time_usd']:,.2f}."
    ]
    for name in ("fastest", "cheapest"):
        o = s.get(name)
        if o and (o["machine"], o["batch_size"]) != (r["machine"], r["batch_size"]):
            out.append(
                f"  the {name} run ({o['machine']} batch {o['batch_size']}) would total USD "
                f"{o['total_usd']:,.2f} (cloud {o['cost_usd']:,.2f} + time {o['time_usd']:,.2f})."
            )
    if s.get("front"):
        out.append(f"  On the front: {s['front']['text']}.")
    return out
