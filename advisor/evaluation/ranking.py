"""One selection rule for everything the advice names: the ranking order, the recommended
run, the fastest, the cheapest and the Pareto set, all over the same scored set with the same
tie rule. Works on plain ``Point`` values (run time, cost, feasibility) so the report (which
scores every screened candidate, measured or modelled) and ``advisor.study.selection.recommended_trial`` (which
only knows the study's trials, for ``advisor submit``) choose the same way.

The tie rule: values within ``TIE_SHARE`` (5 %) of the best are a tie -- well inside the
estimates' intervals -- and the other metric decides among them (the cheapest of the fastest,
or the fastest of the cheapest). The ranking is ordered by tie groups, so the first group holds
the recommendation; a Pareto study recommends the knee of the front.

Stable ties (issue #28): the deciding metric ties too when within ``share`` of the group's
best on it; those candidates are then ordered by a key that no measurement moves, the point's
``tiebreak`` (the report's rows: list price per hour, then machine name, then batch size), so
probe noise of a few per cent cannot swap two machines the estimates cannot tell apart
(``TIE_RULE`` says it in words). ``share`` is ``TIE_SHARE`` when every probe had the CPU to
itself, ``TIE_MAX_SHARE`` (a prior) when any shared it (``contention_band``).

The band's edge in the front's widest gap (issue #36): with a band of a fixed share, "the
cheapest within the band" is by construction the front row nearest the band's edge (along the
time-cost front the cost falls as the time rises), so a few per cent of noise in that one row
moved it in or out and changed the answer: on a quiet machine the 5 % band gave five answers
in ten runs (the rows 1-5 % apart there, denser than their noise), on a busy one the 25 %
band two in ten (one row at +22.9 % to +25.2 %). The band now runs at least ``TIE_SHARE`` past
the best and at most ``reach`` (``TIE_MAX_SHARE``), and ends in the widest gap of the front
within that range (``band_limit``): no front row lies near the edge, and it moves only when
another gap grows wider. ``reach`` equal to ``TIE_SHARE`` keeps the fixed 5 % band (a total of
cost and time under ``--value-of-time``, one metric the user priced).

Never a beaten row (issue #50): the keys choose only among the rows no other feasible row
beats on both time and cost, so the recommendation is on the time-cost front. Before, they
took a row the one beside it beat on both (fcn: batch 256, 2.4 min, USD 0.0085, over batch
512 of the same machine, 2.3 min, USD 0.0082). ``decide`` says which step took it. One
machine's rows within ``share`` of the pick on both metrics and unbeaten are one choice the
smaller batch takes (issue #36; ``same_machine_alternatives``); as one machine's rows cost the
same per hour, the faster is the cheaper too, and the noise picks the batch, not the machine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

TIE_SHARE = 0.05  # values this close to the best always tie (and the quiet machine's cost band)
# A prior: how far the band may reach past the best, and the other metric's band when probes
# shared the CPU (contention moved rows by up to this much: docs/benchmarks.md).
TIE_MAX_SHARE = 0.25
# The rule that picks among a tie group, in words (the report's confidence line).
TIE_RULE = {
    "time": "the cheapest (the band ends in the front's widest gap between 5 % and 25 %; "
    "of the rows no other beats on both time and cost, costs within the cost band tie: the "
    "lower list price, then the name, then the smaller batch; its machine's batch sizes "
    "within that band of it and not beaten on both: the smaller)",
    "cost": "the fastest (the band ends in the front's widest gap between 5 % and 25 %; "
    "of the rows no other beats on both time and cost, times within the time band tie: the "
    "lower list price, then the name, then the smaller batch; its machine's batch sizes "
    "within that band of it and not beaten on both: the smaller)",
    # --value-of-time: one priced metric, the fixed 5 % band (``reach`` = ``TIE_SHARE``)
    "total": "the fastest (of the rows no other beats on both time and total, times within "
    "the band tie: the lower list price, then the name, then the smaller batch; its "
    "machine's batch sizes within the band of it and not beaten on both: the smaller)",
}
# What decided, in ``Decision.by``: the only row in the band, the other metric, or a key.
KEYS = ("price", "name", "batch")
PARETO_MAX = 8  # most points the reported Pareto set keeps (ends and knee always kept)


def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether point ``a`` is no worse than ``b`` in both objectives and differs from it."""
    return a[0] <= b[0] and a[1] <= b[1] and a != b


@dataclass(frozen=True)
class Point:
    """One scored candidate: run time (s), cost (USD), whether it meets the limits, and what
    it stands for (a trial, a report row...)."""

    runtime: float
    cost: float
    feasible: bool
    ref: Any = None
    # Orders points that tie on both metrics by something no measurement moves (the list
    # price per hour, the machine's name, the batch size); () leaves the metrics' order.
    tiebreak: tuple[Any, ...] = ()


def _primary(p: Point, objective: str) -> tuple[float, float]:
    return (p.cost, p.runtime) if objective == "cost" else (p.runtime, p.cost)


def contention_band(contended: bool) -> float:
    """The tie band (issue #36): ``TIE_MAX_SHARE`` when a probe the rows rest on was timed
    while other processes kept the CPU busy (its times may be off by tens of per cent, and
    they move between runs), else ``TIE_SHARE``. Two levels, so that the band itself does not
    move with the noise it stands for."""
    return TIE_MAX_SHARE if contended else TIE_SHARE


def tie_groups(
    points: Sequence[Point], objective: str, share: float = TIE_SHARE, reach: float = TIE_MAX_SHARE
) -> list[list[Point]]:
    """Points grouped by the tie rule on the objective's metric (time, or cost for "cost"):
    each group runs from its best to its band's edge (``band_limit``: at least ``TIE_SHARE``
    past the best, at most ``reach``); inside a group the other metric decides, its values
    within ``share`` of the group's best on it tying again."""
    rest = sorted(points, key=lambda p: _primary(p, objective))
    groups: list[list[Point]] = []
    while rest:
        groups.append(first_tie_group(rest, objective, reach))
        rest = rest[len(groups[-1]) :]
    return [_order_inside(g, objective, share) for g in groups]


def first_tie_group(
    points: Sequence[Point], objective: str, reach: float = TIE_MAX_SHARE
) -> list[Point]:
    """The points in the best point's tie band (``band_limit``), best first: the group the
    recommendation is taken from."""
    limit = band_limit(points, objective, reach)
    return sorted(
        (p for p in points if _primary(p, objective)[0] <= limit),
        key=lambda p: _primary(p, objective),
    )


def band_limit(points: Sequence[Point], objective: str, reach: float = TIE_MAX_SHARE) -> float:
    """The tie band's edge on the objective's metric (issue #36, third round), as a value:
    everything within ``TIE_SHARE`` of the best value ties; past it the band reaches on, at
    most to ``reach`` past the best, and ends in the widest gap of the front there (the
    points no other point beats on both metrics: the only ones "the cheapest within the
    band" can take). Each gap between neighbouring front values counts only its part inside
    [``TIE_SHARE``, ``reach``]; the band ends at the gap's lower front value, or at
    ``TIE_SHARE`` when that value lies below it. No front point lies within the widest gap,
    so the edge moves only when another gap grows wider than it, not when one point's noise
    carries it across a fixed share. ``reach`` <= ``TIE_SHARE`` gives the fixed 5 % band."""
    return band_edge(points, objective, reach)[0]


def band_edge(
    points: Sequence[Point], objective: str, reach: float = TIE_MAX_SHARE
) -> tuple[float, float, float]:
    """``band_limit``'s value, with the widest gap and the next widest (shares of the best
    value, clipped to [``TIE_SHARE``, ``reach``]; 0 when none): how clearly the edge lies
    where it does."""
    values = _front_values(points, objective)
    best = values[0]
    floor = best * (1 + TIE_SHARE)
    if best <= 0 or reach <= TIE_SHARE:
        return floor, 0.0, 0.0
    shares = [v / best - 1 for v in values]
    gaps = [
        (min(above, reach) - max(below, TIE_SHARE), value)
        for value, below, above in zip(values, shares, [*shares[1:], math.inf], strict=True)
        if below < reach
    ]
    gaps.sort(key=lambda g: -g[0])  # stable: of two equal gaps the nearer one
    widest, value = gaps[0]
    second = gaps[1][0] if len(gaps) > 1 else 0.0
    return max(value, floor), max(widest, 0.0), max(second, 0.0)


def band_share(points: Sequence[Point], objective: str, reach: float = TIE_MAX_SHARE) -> float:
    """The first tie band's edge as a share of the best value (0.05 to ``reach``; 0 without
    points or when the best value is 0): what the report says the band was."""
    if not points:
        return 0.0
    best = min(_primary(p, objective)[0] for p in points)
    return band_limit(points, objective, reach) / best - 1 if best > 0 else 0.0


def _front_values(points: Sequence[Point], objective: str) -> list[float]:
    """The objective metric's values of the points no other point beats on both metrics,
    ascending (the best first): a sweep that keeps a point when its other metric is below
    every better point's."""
    values: list[float] = []
    other = float("inf")
    for p in sorted(points, key=lambda p: _primary(p, objective)):
        v, w = _primary(p, objective)
        if w < other:
            values.append(v)
            other = w
    return values


def _order_inside(group: list[Point], objective: str, share: float = TIE_SHARE) -> list[Point]:
    """A tie group ordered by the other metric; its points no other point of the group beats
    on both metrics (``beaten``) and within ``share`` of the best on the other metric tie
    again and come first, ordered by their ``tiebreak`` (then the metrics)."""
    by_other = sorted(group, key=lambda p: (_primary(p, objective)[1], _primary(p, objective)[0]))
    tied = _key_tied(by_other, objective, share)
    if not any(p.tiebreak for p in tied):
        return by_other
    return tied + [p for p in by_other if not any(p is t for t in tied)]


def _key_tied(by_other: list[Point], objective: str, share: float) -> list[Point]:
    """The points of a tie group (sorted by the other metric) that the stated keys choose
    among, in the keys' order: within ``share`` of the best on the other metric, and beaten
    on both metrics by no point of the group (issue #50). The group's best on the other
    metric is never beaten, so there is always one."""
    best = _primary(by_other[0], objective)[1]
    out = beaten(by_other)
    tied = [
        p for p in by_other if _primary(p, objective)[1] <= best * (1 + share) and id(p) not in out
    ]
    if any(p.tiebreak for p in tied):
        tied.sort(key=lambda p: (p.tiebreak, *reversed(_primary(p, objective))))
    return tied


def beaten(points: Sequence[Point]) -> set[int]:
    """The ``id``s of the points another of ``points`` beats on both run time and cost (no
    worse on both, better on one; ``dominates``), in one sweep by run time."""
    out: set[int] = set()
    low = math.inf  # the least cost of the distinct (time, cost) pairs before this one
    for (_, cost), same in groupby(sorted(points, key=_pair), key=_pair):
        if low <= cost:
            out.update(id(p) for p in same)
        low = min(low, cost)
    return out


def _pair(p: Point) -> tuple[float, float]:
    return (p.runtime, p.cost)


def rank(
    points: Sequence[Point], objective: str, share: float = TIE_SHARE, reach: float = TIE_MAX_SHARE
) -> list[Point]:
    """The ranking: feasible points first; by tie group (band ``share``) and the other metric
    for "time" and "cost", by distance to the ideal point (the knee first) for "pareto"."""
    feasible = [p for p in points if p.feasible]
    rest = [p for p in points if not p.feasible]
    if objective == "pareto" and not feasible:  # nothing fits (or every probe failed)
        return sorted(rest, key=lambda p: (p.runtime, p.cost, p.tiebreak))
    if objective == "pareto":
        front = pareto_set(feasible)
        ordered = sorted(feasible, key=_knee_distance(front or feasible)) if feasible else []
        if front:  # the knee leads, as it is the recommendation
            k = knee_point(front)
            ordered = [k, *(p for p in ordered if p is not k)]
        return ordered + sorted(rest, key=lambda p: (p.runtime, p.cost))
    ordered = [p for g in tie_groups(feasible, objective, share, reach) for p in g]
    choice = decide(feasible, objective, share, reach)
    if choice is not None:  # the recommendation leads (a smaller batch may have taken it)
        ordered = [choice.pick, *(p for p in ordered if p is not choice.pick)]
    return ordered + [p for g in tie_groups(rest, objective, share, reach) for p in g]


def same_machine_alternatives(pick: Point, points: Sequence[Point], share: float) -> list[Point]:
    """The feasible points of ``pick``'s machine (the same list price and name: ``tiebreak``'s
    first two keys) within ``share`` of ``pick`` on both time and cost and beaten on both by
    no feasible point (issue #50): alternatives the measurements cannot tell from it that no
    row beats, ``pick`` included; [] without tiebreak keys."""
    if len(pick.tiebreak) < 2:
        return []
    feasible = [p for p in points if p.feasible]
    out = beaten(feasible)
    return [
        p
        for p in feasible
        if p.tiebreak[:2] == pick.tiebreak[:2]
        and id(p) not in out
        and within(p.runtime, pick.runtime, share)
        and within(p.cost, pick.cost, share)
    ]


def within(value: float, ref: float, share: float) -> bool:
    """Whether ``value`` and ``ref`` are within ``share`` of the smaller of the two."""
    low, high = sorted((value, ref))
    return high <= low * (1 + share)


@dataclass(frozen=True)
class Decision:
    """How the tie rule reached its recommendation, step by step (the report's words say
    exactly this): the first tie ``group`` (the band's points, best first) and its ``edge``
    (a share of the best value); ``beaten``, how many of them another beats on both metrics;
    ``tied``, the unbeaten ones within ``share`` of the group's best on the other metric,
    in the keys' order; ``by``, what took the group's pick: "alone" (the band holds one
    point), "metric" (the other metric: the cheapest, or the fastest), or a key of ``KEYS``
    ("price", "name", "batch": where the pick's tiebreak differs from the runner-up's); and
    ``pick``, which is the group's pick unless its machine's smaller batch took it
    (``group_pick`` then; issue #36)."""

    pick: Point
    group_pick: Point
    group: tuple[Point, ...]
    edge: float
    beaten: int
    tied: tuple[Point, ...]
    by: str


def decide(
    points: Sequence[Point], objective: str, share: float = TIE_SHARE, reach: float = TIE_MAX_SHARE
) -> Decision | None:
    """The recommendation of "time" and "cost" by the tie rule, with how it was reached
    (``Decision``); None when no point is feasible."""
    feasible = [p for p in points if p.feasible]
    if not feasible or objective == "pareto":
        return None
    group = first_tie_group(feasible, objective, reach)
    by_other = sorted(group, key=lambda p: (_primary(p, objective)[1], _primary(p, objective)[0]))
    tied = _key_tied(by_other, objective, share)
    keyed = any(p.tiebreak for p in tied)
    first = tied[0] if keyed else by_other[0]
    by = "alone" if len(group) == 1 else "metric"
    if keyed and len(tied) > 1:  # the first key on which the runner-up differs
        a, b = tied[0].tiebreak, tied[1].tiebreak
        by = next((KEYS[i] for i in range(min(len(a), len(b), 3)) if a[i] != b[i]), by)
    # issue #36: its machine's other batch sizes within the band of it on both metrics, not
    # beaten on both, are one choice; the smaller batch takes it
    same = same_machine_alternatives(first, feasible, share)
    pick = min(same, key=lambda p: p.tiebreak) if len(same) > 1 else first
    out = beaten(group)
    return Decision(
        pick, first, tuple(group), band_share(feasible, objective, reach),
        sum(1 for p in group if id(p) in out), tuple(tied), by,
    )  # fmt: skip


def recommended(
    points: Sequence[Point], objective: str, share: float = TIE_SHARE, reach: float = TIE_MAX_SHARE
) -> Point | None:
    """The run to train with: the ranking's first feasible point (None when none fits)."""
    ranked = rank(points, objective, share, reach)
    return ranked[0] if ranked and ranked[0].feasible else None


def fastest(points: Sequence[Point]) -> Point | None:
    """The feasible point with the least run time (ties: the cheaper)."""
    feasible = [p for p in points if p.feasible]
    return min(feasible, key=lambda p: (p.runtime, p.cost)) if feasible else None


def cheapest(points: Sequence[Point]) -> Point | None:
    """The feasible point with the least cost (ties: the faster)."""
    feasible = [p for p in points if p.feasible]
    return min(feasible, key=lambda p: (p.cost, p.runtime)) if feasible else None


def non_dominated(points: Sequence[Point]) -> list[Point]:
    """Points no other point dominates in (runtime, cost), sorted by run time."""
    out_ids = beaten(points)
    front = [p for p in points if id(p) not in out_ids]
    out: list[Point] = []
    for p in sorted(front, key=lambda p: (p.runtime, p.cost)):
        if not out or (p.runtime, p.cost) != (out[-1].runtime, out[-1].cost):
            out.append(p)
    return out


def pareto_set(points: Sequence[Point], max_points: int = PARETO_MAX) -> list[Point]:
    """The feasible Pareto front, sorted by run time, thinned by the tie rule: a point within
    ``TIE_SHARE`` of the time of the kept point's tie group replaces it when cheaper, a slower
    point stays only when it is more than ``TIE_SHARE`` cheaper than the last kept one; at most ``max_points`` (spread evenly,
    ends and knee kept)."""
    kept: list[Point] = []
    anchor = 0.0  # the run time of the fastest point of the last kept point's tie group
    for p in non_dominated([p for p in points if p.feasible]):
        if kept and p.runtime <= anchor * (1 + TIE_SHARE):
            if p.cost < kept[-1].cost:
                kept[-1] = p
        elif not kept or p.cost < kept[-1].cost * (1 - TIE_SHARE):
            kept.append(p)
            anchor = p.runtime
    if len(kept) <= max_points:
        return kept
    k = knee_point(kept)
    step = (len(kept) - 1) / (max_points - 1)
    picks = {round(i * step) for i in range(max_points)} | {kept.index(k)}
    while len(picks) > max_points:  # the knee took a slot: drop the pick nearest to it
        inner = sorted(
            picks - {0, len(kept) - 1, kept.index(k)}, key=lambda i: abs(i - kept.index(k))
        )
        picks.discard(inner[0])
    return [kept[i] for i in sorted(picks)]


def _knee_distance(front: Sequence[Point]) -> Any:
    lo = (min(p.runtime for p in front), min(p.cost for p in front))
    hi = (max(p.runtime for p in front), max(p.cost for p in front))

    def dist(p: Point) -> tuple[float, float, float]:
        d = ((p.runtime - lo[0]) / ((hi[0] - lo[0]) or 1.0)) ** 2 + (
            (p.cost - lo[1]) / ((hi[1] - lo[1]) or 1.0)
        ) ** 2
        return (d, p.runtime, p.cost)

    return dist


def knee_point(front: Sequence[Point]) -> Point:
    """The front member closest to the ideal point, each objective scaled to [0, 1] over it."""
    return min(front, key=_knee_distance(front))
