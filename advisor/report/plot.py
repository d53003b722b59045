"""The report's time-cost plot: a PNG (matplotlib) and an interactive HTML twin (Plotly).

Every scored point (on demand, spot, this machine) with its interval, on a log time axis in
s/min/h and a log cost axis in USD (this machine, free, sits on a "USD 0" floor line); the
Pareto front and the recommendation marked; budget and deadline lines only where they fall
inside the view; labels placed so they do not collide.
"""

from __future__ import annotations

import math
from typing import Any

from advisor.durations import format_duration
from advisor.providers.catalog import MachineKey

REMOTE = ("probed", "emulated")  # issue #14: measured on the machine (or emulated) by a probe
GROUPS = (  # (name, test, marker, colour)
    (
        "on demand",
        lambda r: not r["spot"] and r.get("service") != "local" and r.get("known") not in REMOTE,
        "o",
        "#1f77b4",
    ),
    ("spot", lambda r: bool(r["spot"]) and r.get("known") not in REMOTE, "^", "#ff7f0e"),
    ("this machine", lambda r: r.get("service") == "local", "s", "#2ca02c"),
    ("remote probe", lambda r: r.get("known") == "probed", "D", "#9467bd"),
    ("remote probe, emulated here", lambda r: r.get("known") == "emulated", "d", "#8c564b"),
)


def _label(r: dict[str, Any]) -> str:
    name = MachineKey(r["machine"]).instance_type
    return f"{name}{' spot' if r['spot'] else ''} b{r['batch_size']}"


def _time_ticks(lo: float, hi: float) -> list[float]:
    nice: list[float] = [1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600, 7200]
    nice += [14400, 28800, *(86400 * k for k in (1, 2, 4, 7))]
    ticks = [t for t in nice if lo <= t <= hi]
    if len(ticks) > 8:
        ticks = ticks[:: math.ceil(len(ticks) / 8)]
    return ticks


def _cost_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks in USD between ``lo`` and ``hi`` (at most about 9)."""
    ticks = [m * 10.0**e for e in range(-4, 6) for m in (1, 2, 5)]
    ticks = [t for t in ticks if lo <= t <= hi]
    return ticks[:: math.ceil(len(ticks) / 9)] if ticks else ticks


def _rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every scored candidate (the report's compact ``points``; else its ranking rows)."""
    if "points" not in report:
        return [r for r in report["ranking"] if r["runtime_s"] and r["cost_usd"]]
    rows = []
    for p in report["points"]:
        row = dict(
            zip(("machine", "batch_size", "spot", "service", "feasible"), p[:5], strict=True)
        )
        for key, (v, lo, hi) in zip(("runtime_s", "cost_usd"), p[5:7], strict=True):
            row[key] = {"value": v, "low": lo, "high": hi}
        row["known"] = p[7] if len(p) > 7 else None  # issue #14
        rows.append(row)
    return rows


def _view(rows: list[dict[str, Any]]) -> tuple[float, float, float, float, float]:
    """(time low, time high, cost floor for free runs, cost low, cost high) of the view."""
    times = [r["runtime_s"]["value"] for r in rows]
    costs = [r["cost_usd"]["value"] for r in rows if r["cost_usd"]["value"] > 0]
    t_lo, t_hi = min(times) / 1.6, max(times) * 1.6
    c_lo = min(costs) if costs else 0.01
    c_hi = max(costs) if costs else 1.0
    floor = c_lo / 2.5
    return t_lo, t_hi, floor, floor / 1.5, c_hi * 1.8


def _same(a: dict[str, Any], b: dict[str, Any] | None) -> bool:
    return b is not None and (a["machine"], a["batch_size"]) == (b["machine"], b["batch_size"])


def plot(report: dict[str, Any], path: str) -> None:
    """Cost vs run time of every scored candidate (PNG at ``path``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    rows = _rows(report)
    fig, ax = plt.subplots(figsize=(10, 6.5))
    if not rows:
        ax.text(0.5, 0.5, "nothing scored", ha="center", transform=ax.transAxes)
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return
    t_lo, t_hi, floor, c_lo, c_hi = _view(rows)

    def y(r: dict[str, Any], key: str = "value") -> float:
        return max(r["cost_usd"][key], c_lo) if r["cost_usd"]["value"] > 0 else floor

    many = len(rows) > 40  # then intervals only for the front and the recommendation

    for name, test, marker, colour in GROUPS:
        for feasible in (True, False):
            pts = [r for r in rows if test(r) and r["feasible"] == feasible]
            if not pts:
                continue
            xs = [r["runtime_s"]["value"] for r in pts]
            ys = [y(r) for r in pts]
            xerr = [
                [r["runtime_s"]["value"] - r["runtime_s"]["low"] for r in pts],
                [r["runtime_s"]["high"] - r["runtime_s"]["value"] for r in pts],
            ]
            yerr = [
                [max(y(r) - y(r, "low"), 0.0) for r in pts],
                [max(y(r, "high") - y(r), 0.0) for r in pts],
            ]
            ax.errorbar(
                xs, ys, xerr=None if many else xerr, yerr=None if many else yerr, fmt=marker,
                ms=4 if many else 6, color=colour, mfc=colour if feasible else "white",
                alpha=(0.45 if many else 0.75) if feasible else 0.4, elinewidth=0.5,
                capsize=0, zorder=3, label=name if feasible else f"{name}, over the limit",
            )  # fmt: skip
    front = sorted(report["pareto"], key=lambda r: r["runtime_s"]["value"])
    if front:
        ax.step(
            [r["runtime_s"]["value"] for r in front], [y(r) for r in front], where="post",
            color="black", lw=1.0, ls="--", zorder=2, label="Pareto front",
        )  # fmt: skip
        ax.errorbar(
            [r["runtime_s"]["value"] for r in front], [y(r) for r in front],
            xerr=[[r["runtime_s"]["value"] - r["runtime_s"]["low"] for r in front],
                  [r["runtime_s"]["high"] - r["runtime_s"]["value"] for r in front]],
            yerr=[[max(y(r) - y(r, "low"), 0.0) for r in front],
                  [max(y(r, "high") - y(r), 0.0) for r in front]],
            fmt="o", ms=10, mfc="none", mec="black", mew=1.2, ecolor="black",
            elinewidth=0.7, capsize=2, zorder=4,
        )  # fmt: skip
    rec = report.get("recommended")
    if rec:
        ax.scatter(
            [rec["runtime_s"]["value"]], [y(rec)], marker="*", s=380, color="#d62728",
            edgecolors="black", lw=0.8, zorder=5, label="recommended",
        )  # fmt: skip
    same = _same_total(report, t_lo, t_hi, c_lo)
    if rec and same:  # issue #37: the runs of the same total (cost + time x value) as the choice
        ax.plot(*same[:2], color="#d62728", lw=0.8, ls="-.", zorder=2, label=same[2])
    if any(r["cost_usd"]["value"] <= 0 for r in rows):
        ax.axhline(floor, color="#2ca02c", lw=0.6, ls=":", zorder=1)
    budget, deadline = report.get("budget_usd"), report.get("deadline_s")
    if budget and c_lo <= budget <= c_hi:
        ax.axhline(budget, color="red", lw=0.9, label=f"budget USD {budget:g}")
    if deadline and t_lo <= deadline <= t_hi:
        ax.axvline(
            deadline,
            color="purple",
            lw=0.9,
            label=f"deadline {format_duration(deadline, tick=True)}",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(t_lo, t_hi)
    ax.set_ylim(c_lo, c_hi)
    ax.xaxis.set_major_locator(FixedLocator(_time_ticks(t_lo, t_hi)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_duration(v, tick=True)))
    ax.yaxis.set_major_formatter(
        FuncFormatter(lambda v, _: "0" if abs(v - floor) < 1e-12 else f"{v:g}")
    )
    ticks = [t for t in _cost_ticks(c_lo, c_hi) if t > floor * 1.3]
    free = [floor] if any(r["cost_usd"]["value"] <= 0 for r in rows) else []
    ax.yaxis.set_major_locator(FixedLocator([*free, *ticks]))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.grid(True, which="major", lw=0.3, alpha=0.6)
    ax.set_xlabel("estimated run time: start-up + training (log scale)")
    ax.set_ylabel("estimated cost, USD (log scale; 0 = this machine)")
    ax.set_title(
        f"{report['workload']}: cost vs run time of {len(rows)} scored candidates "
        f"(objective {_objective(report)})",
        fontsize=10,
    )
    ax.legend(fontsize=8, loc="upper right", framealpha=0.9)
    _annotate(fig, ax, rows, front, rec, report, y)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _same_total(
    report: dict[str, Any], t_lo: float, t_hi: float, c_lo: float
) -> tuple[list[float], list[float], str] | None:
    """Issue #37: the curve of runs whose cost + time x value equals the choice's total
    (times, costs, legend label), or None without ``--value-of-time``."""
    vot = (report.get("value_of_time") or {}).get("recommended")
    if not vot:
        return None
    v = report["value_of_time"]["usd_per_hour"]
    total = vot["total_usd"]
    ts = [t_lo * (t_hi / t_lo) ** (i / 60) for i in range(61)]
    # On a log cost axis the line falls steeply where its cost nears the floor: sample it by
    # cost there too, so the curve reaches the choice's own point.
    c_hi = max(total - t_lo / 3600 * v, c_lo * 1.01)
    cs = [c_lo * (c_hi / c_lo) ** (i / 60) for i in range(61)]
    ts += [(total - c) * 3600 / v for c in cs if v > 0]
    line = sorted({(t, total - t / 3600 * v) for t in ts if t > 0})
    kept = [(t, c) for t, c in line if c > c_lo]
    label = f"same total as the choice at USD {v:g}/h"
    return [t for t, _ in kept], [c for _, c in kept], label


def _objective(report: dict[str, Any]) -> str:
    vot = report.get("value_of_time")  # issue #37
    return f"cost + time x USD {vot['usd_per_hour']:g}/h" if vot else str(report["objective"])


def _annotate(
    fig: Any, ax: Any, rows: list[dict[str, Any]], front: list[dict[str, Any]],
    rec: dict[str, Any] | None, report: dict[str, Any], y: Any,
) -> None:  # fmt: skip
    """Label the front, the recommendation, the fastest, the cheapest and this machine, each
    at the first of eight offsets whose box overlaps no label placed before it."""
    chosen: list[tuple[dict[str, Any], str]] = []
    if rec:
        chosen.append((rec, "recommended: "))
    for key, tag in (("best_by_time", "fastest: "), ("best_by_cost", "cheapest: ")):
        r = report.get(key)
        if r and not any(_same(r, c) for c, _ in chosen):
            chosen.append((r, tag))
    for r in [*front, *(r for r in rows if r.get("service") == "local")][:12]:
        if not any(_same(r, c) for c, _ in chosen):
            chosen.append((r, ""))
    renderer = fig.canvas.get_renderer()
    placed = [ax.get_legend().get_window_extent(renderer)] if ax.get_legend() else []
    offsets = [(8, 6), (8, -12), (-8, 6), (-8, -12), (10, 18), (10, -24), (-10, 18), (-10, -24)]
    offsets += [(14, 32), (14, -38), (-14, 32), (-14, -38)]
    for r, tag in chosen:
        xy = (r["runtime_s"]["value"], y(r))
        for dx, dy in offsets:
            ann = ax.annotate(
                tag + _label(r), xy, xytext=(dx, dy), textcoords="offset points", fontsize=7,
                ha="left" if dx > 0 else "right", zorder=6,
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
                arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "grey"},
            )  # fmt: skip
            box = ann.get_window_extent(renderer)
            inside = ax.get_window_extent(renderer).contains(box.x0, box.y0) and (
                ax.get_window_extent(renderer).contains(box.x1, box.y1)
            )
            if inside and not any(box.overlaps(b) for b in placed):
                placed.append(box)
                break
            ann.remove()


def plot_html(report: dict[str, Any], path: str) -> None:
    """The same plot as a self-contained interactive HTML page (Plotly, bundled inline)."""
    from advisor._lazy import require

    go = require("plotly.graph_objects", "plot", "writing the HTML plot")
    rows = _rows(report)
    fig = go.Figure()
    if rows:
        t_lo, t_hi, floor, c_lo, c_hi = _view(rows)
    else:
        t_lo, t_hi, floor, c_lo, c_hi = 1.0, 3600.0, 0.01, 0.005, 1.0
    many = len(rows) > 40  # then no interval bars (the hover text has them)

    def y(r: dict[str, Any]) -> float:
        return float(r["cost_usd"]["value"]) if r["cost_usd"]["value"] > 0 else floor

    symbols = {
        "o": "circle",
        "^": "triangle-up",
        "s": "square",
        "D": "diamond",
        "d": "diamond-tall",
    }
    for name, test, marker, colour in GROUPS:
        pts = [r for r in rows if test(r)]
        if not pts:
            continue
        fig.add_trace(
            go.Scatter(
                x=[r["runtime_s"]["value"] for r in pts],
                y=[y(r) for r in pts],
                mode="markers",
                name=name,
                marker={
                    "symbol": [symbols[marker] + ("" if r["feasible"] else "-open") for r in pts],
                    "color": colour,
                    "size": 6 if many else 9,
                    "opacity": 0.6 if many else 0.9,
                },
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "thickness": 0.6,
                    "visible": not many,
                    "array": [r["runtime_s"]["high"] - r["runtime_s"]["value"] for r in pts],
                    "arrayminus": [r["runtime_s"]["value"] - r["runtime_s"]["low"] for r in pts],
                },
                text=[_hover(r) for r in pts],
                hoverinfo="text",
            )
        )
    front = sorted(report["pareto"], key=lambda r: r["runtime_s"]["value"])
    if front:
        fig.add_trace(
            go.Scatter(
                x=[r["runtime_s"]["value"] for r in front], y=[y(r) for r in front],
                mode="lines+markers", line={"shape": "hv", "dash": "dash", "color": "black"},
                marker={"symbol": "circle-open", "size": 14, "color": "black"},
                name="Pareto front", text=[_hover(r) for r in front], hoverinfo="text",
            )
        )  # fmt: skip
    rec = report.get("recommended")
    same = _same_total(report, t_lo, t_hi, c_lo)
    if rec and same:  # issue #37: as the PNG, the curve of the choice's total
        fig.add_trace(
            go.Scatter(
                x=same[0], y=same[1], mode="lines", name=same[2], hoverinfo="skip",
                line={"color": "#d62728", "dash": "dashdot", "width": 1.5},
            )
        )  # fmt: skip
    if rec:
        total = _total_text(report)
        fig.add_trace(
            go.Scatter(
                x=[rec["runtime_s"]["value"]], y=[y(rec)], mode="markers+text",
                marker={"symbol": "star", "size": 20, "color": "#d62728"},
                text=["recommended: " + _label(rec) + total], textposition="top right",
                name="recommended",
                hovertext=[_hover(rec) + "<br>" + rec.get("reason", "") + total],
                hoverinfo="text",
            )
        )  # fmt: skip
    if report.get("budget_usd") and c_lo <= report["budget_usd"] <= c_hi:
        fig.add_hline(y=report["budget_usd"], line_color="red", annotation_text="budget")
    if report.get("deadline_s"):
        fig.add_vline(x=report["deadline_s"], line_color="purple", annotation_text="deadline")
    ticks = _time_ticks(t_lo, t_hi)
    fig.update_xaxes(
        type="log", title="estimated run time: start-up + training", tickvals=ticks,
        ticktext=[format_duration(t, tick=True) for t in ticks],
    )  # fmt: skip
    fig.update_yaxes(type="log", title="estimated cost, USD (this machine, free, at the bottom)")
    if rec and same:  # the curve runs past the points: keep the PNG's view
        fig.update_yaxes(range=[math.log10(c_lo), math.log10(c_hi)])
    fig.update_layout(
        title=f"{report['workload']}: cost vs run time, objective {_objective(report)} "
        f"({report['study']})",
        template="plotly_white",
    )
    fig.write_html(path, include_plotlyjs=True, full_html=True)


def _total_text(report: dict[str, Any]) -> str:
    """Issue #37: the choice's total under ``--value-of-time`` (empty without it)."""
    vot = (report.get("value_of_time") or {}).get("recommended")
    return (
        f", total USD {vot['total_usd']:.3g} at USD {report['value_of_time']['usd_per_hour']:g}/h"
        if vot
        else ""
    )


def _hover(r: dict[str, Any]) -> str:
    rt, c = r["runtime_s"], r["cost_usd"]
    return (
        f"{r['machine']} batch {r['batch_size']}<br>"
        f"run time {format_duration(round(rt['value']), tick=True)} ({format_duration(round(rt['low']), tick=True)}-"
        f"{format_duration(round(rt['high']), tick=True)})<br>"
        f"cost USD {c['value']:.3g} ({c['low']:.3g}-{c['high']:.3g})<br>{r.get('source', '')}"
        + ("" if r["feasible"] else "<br>over the limit")
    )
