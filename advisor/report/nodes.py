"""Issue #49: what the report says about node counts.

- ``--max-nodes 1`` (the default): when one of the study's ``more_nodes`` rows (the best
  networked types on 2, 4, 8 machines, ``advisor.study.more_nodes``) meets the limits and is
  faster or cheaper than the recommendation, a line naming the node count and the gain.
- ``--max-nodes N`` > 1: for each node count other than the recommendation's, its best row
  (meeting the limits first, by the objective) and the short reason it lost: it does not fit
  any GPU's memory, it breaks the budget or deadline, or it is slower or dearer (with the
  share of its step spent on the network between machines, when modelled).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.durations import format_duration
from advisor.evaluation.contract import Evaluation
from advisor.options import is_feasible
from advisor.providers.catalog import MachineKey

if TYPE_CHECKING:
    from advisor.outcome import SuggestOutcome


def section(
    outcome: SuggestOutcome, rec: dict[str, Any] | None, rows: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The report's ``nodes`` section: ``max_nodes``, ``better`` (the --max-nodes 1 lines'
    rows) and ``lost`` ({nodes, reason, row}: why each other node count lost)."""
    max_nodes = outcome.options.max_nodes
    if rec is None or (max_nodes <= 1 and not outcome.more_nodes):
        return None
    if max_nodes <= 1:
        better = _better(outcome, rec)
        return {"max_nodes": 1, "better": better, "lost": []} if better else None
    counts = sorted({MachineKey(c.key).nodes for c in outcome.candidates} | {1})
    mine = int(rec.get("nodes") or 1)
    lost = []
    for n in counts:
        if n == mine:
            continue
        group = [r for r in rows if int(r.get("nodes") or 1) == n]
        lost.append({"nodes": n, "reason": _why_lost(outcome, rec, group, n)})
    return {"max_nodes": max_nodes, "better": [], "lost": lost} if lost else None


def _better(outcome: SuggestOutcome, rec: dict[str, Any]) -> list[dict[str, Any]]:
    """The fastest and the cheapest ``more_nodes`` rows meeting the limits that beat the
    recommendation on time or on cost (one entry when the same row does both)."""
    ok = [ev for ev in outcome.more_nodes
          if isinstance(ev, Evaluation) and is_feasible(outcome.options, ev)]  # fmt: skip
    t0, c0 = rec["runtime_s"]["value"], rec["cost_usd"]["value"]
    out: list[dict[str, Any]] = []
    fast = [ev for ev in ok if ev.runtime.value < t0]
    cheap = [ev for ev in ok if ev.cost.value < c0]
    for found in (min(fast, key=lambda e: e.runtime.value, default=None),
                  min(cheap, key=lambda e: e.cost.value, default=None)):  # fmt: skip
        if found is None or any(o["machine"] == found.machine and o["batch_size"] ==
                                found.batch_size for o in out):  # fmt: skip
            continue
        key = MachineKey(found.machine)
        out.append({
            "machine": found.machine, "nodes": key.nodes, "batch_size": found.batch_size,
            "runtime_s": found.runtime.value, "cost_usd": found.cost.value,
            "text": _gain_text(key, found.batch_size, found.runtime.value, found.cost.value,
                               t0, c0),
        })  # fmt: skip
    return out


def _gain_text(key: MachineKey, batch: int, t: float, c: float, t0: float, c0: float) -> str:
    def change(new: float, old: float, less: str, more: str) -> str:
        return f"{abs(new / old - 1):.0%} {less if new < old else more}" if old > 0 else ""

    return (
        f"On {key.nodes} machines: {key.nodes} x {key.base}{' spot' if key.spot else ''} at "
        f"batch {batch} would take {format_duration(t)} ({change(t, t0, 'faster', 'slower')}) "
        f"for USD {c:.3g} ({change(c, c0, 'cheaper', 'dearer')}) than the recommendation "
        f"under the plans traced for one machine; --max-nodes {key.nodes} searches every plan."
    )


def _why_lost(
    outcome: SuggestOutcome, rec: dict[str, Any], group: list[dict[str, Any]], n: int
) -> str:
    """Why node count ``n`` lost, in a few words, from its rows ``group``."""
    machines = "1 machine" if n == 1 else f"{n} machines"
    if not group:
        return f"{machines}: no candidate scored (does not fit any GPU's memory)"
    fit = [r for r in group if r.get("feasible")]
    if not fit:
        best = min(group, key=lambda r: r["cost_usd"]["value"])
        limit = _broken(outcome, best)
        return f"{machines}: {limit} (best {_figures(best)})"
    key = "cost_usd" if outcome.objective == "cost" else "runtime_s"
    best = min(fit, key=lambda r: r[key]["value"])
    ratio = best[key]["value"] / max(rec[key]["value"], 1e-12)
    if ratio > 1:
        what = f"{ratio:.2f}x {'dearer' if key == 'cost_usd' else 'slower'}"
    else:  # as good on the objective within the tie band, and lost on the other figure
        other = "runtime_s" if key == "cost_usd" else "cost_usd"
        more = best[other]["value"] / max(rec[other]["value"], 1e-12)
        what = (f"{1 / max(ratio, 1e-12):.2f}x {'cheaper' if key == 'cost_usd' else 'faster'}, "
                f"within the tie band, but {more:.2f}x "
                f"{'slower' if other == 'runtime_s' else 'dearer'}")  # fmt: skip
    net = best.get("across_share")
    on_net = f"; {net:.0%} of its step on the network between machines" if net else ""
    return f"{machines}: {what} ({_figures(best)}){on_net}"


def _broken(outcome: SuggestOutcome, row: dict[str, Any]) -> str:
    budget, deadline = outcome.options.budget_usd, outcome.options.deadline_s
    if budget is not None and row["cost_usd"]["value"] > budget:
        return f"over the budget of USD {budget:g}"
    if deadline is not None and row["runtime_s"]["value"] > deadline:
        return f"over the deadline of {format_duration(deadline)}"
    return "outside the limits"


def _figures(row: dict[str, Any]) -> str:
    return (
        f"{MachineKey(row['machine']).base}{' spot' if row.get('spot') else ''} batch "
        f"{row['batch_size']}: "
        f"{format_duration(row['runtime_s']['value'])}, USD {row['cost_usd']['value']:.3g}"
    )


def lines(report: dict[str, Any]) -> list[str]:
    """The report's lines about node counts (none when it has no ``nodes`` section)."""
    s = report.get("nodes")
    if not s:
        return []
    out = [b["text"] for b in s.get("better") or []]
    if s.get("lost"):
        out.append("other node counts lost: " + "; ".join(x["reason"] for x in s["lost"]) + ".")
    return out
