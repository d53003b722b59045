"""The default report of ``advisor suggest``: one screen (80x24 and up).

What it says, in order: what was asked; the recommendation with its time and cost intervals;
how sure it is in plain words (``advisor.report.confidence``); the fastest and the cheapest
alternatives; the top of the ranking; the warnings that change the answer's meaning (failed
or contended probes, stale prices); where the study is and why it stopped; and one line
pointing to the rest (``--verbose`` for the full report, ``--json``, the dashboard).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from advisor.durations import format_duration
from advisor.report.confidence import confidence_line
from advisor.report.hyperparameters import print_lines as print_hyperparameters
from advisor.report.owned import lines as owned_lines
from advisor.report.value_of_time import lines as value_lines

if TYPE_CHECKING:
    from rich.console import Console

TOP_ROWS = 5  # ranking rows of the one-screen report (--top changes it)
WARNINGS_SHOWN = 3  # warning lines of the one-screen report (--verbose: all notes)


def _time(d: dict[str, float] | None, interval: bool = True) -> str:
    """ "1.4 min (0.6-3.4)": the value's unit for the interval too."""
    if not d:
        return "-"
    unit, size = next(
        (u, n) for u, n in (("h", 3600.0), ("min", 60.0), ("s", 1.0)) if d["value"] >= n or u == "s"
    )
    fmt = ".0f" if unit == "s" else (".2f" if unit == "h" else ".1f")
    text = f"{d['value'] / size:{fmt}} {unit}"
    if interval:
        text += f" ({d['low'] / size:{fmt}}-{d['high'] / size:{fmt}})"
    return text


def _usd(d: dict[str, float] | None, interval: bool = True) -> str:
    """USD with cents, or two significant digits below 10 cents; the interval likewise."""
    if not d:
        return "-"

    def fmt(v: float) -> str:
        return f"{v:.2g}" if 0 < abs(v) < 0.1 else f"{v:.2f}"

    text = fmt(d["value"])
    return text + (f" ({fmt(d['low'])}-{fmt(d['high'])})" if interval else "")


def machine_label(row: dict[str, Any]) -> str:
    """``ec2:g6e.2xlarge spot``; this machine as ``this machine``."""
    if row.get("service") == "local":
        return "this machine"
    return str(row["machine"]).removesuffix(":spot") + (" spot" if row.get("spot") else "")


def _gpus(row: dict[str, Any]) -> str:
    return f"{row['gpus']}x {row['accelerator']}" if row.get("gpus") else "cpu"


def _asked(report: dict[str, Any]) -> str:
    limits = []
    if report.get("budget_usd"):
        limits.append(f"USD {report['budget_usd']:g}")
    if report.get("deadline_s"):
        limits.append(f"deadline {format_duration(report['deadline_s'])}")
    goal = {"time": "fastest run", "cost": "cheapest run", "pareto": "time-cost balance"}
    what = goal.get(report["objective"], report["objective"])
    if report.get("value_of_time"):  # issue #37
        what = f"least cost + run time x USD {report['value_of_time']['usd_per_hour']:g}/h"
    return (
        f"{report['workload']} ({report['framework']}): {what}"
        + (f" within {' and '.join(limits)}" if limits else "")
        + f"; {report['ranking_total']} candidates, catalog {report['catalog_snapshot']}"
    )


def _pick(label: str, row: dict[str, Any]) -> str:
    from rich.markup import escape

    startup = row.get("startup_s")
    split = ""
    if startup and startup["value"] > 0 and row.get("training_s"):
        split = (
            f" = {format_duration(startup['value'])} start-up + "
            f"{format_duration(row['training_s']['value'])} training"
        )
    epochs = f", {row['epochs']} epochs" if row.get("epochs") else ""
    return (
        f"[bold]{label}:[/] "
        + escape(f"{machine_label(row)} ({_gpus(row)}), batch {row['batch_size']}{epochs}")
        + escape(f", memory {row['memory']} per device" if row.get("memory") else "")
        + escape(f"\n  plan: {plan_text(row)}" if row.get("gpus") else "")  # issue #35
        + "\n  "
        + escape(f"{_time(row['runtime_s'])}{split}, USD {_usd(row['cost_usd'])}")
    )


def _alternative(label: str, row: dict[str, Any]) -> str:
    from rich.markup import escape

    return f"[bold]{label}:[/] " + escape(
        f"{machine_label(row)} b{row['batch_size']}: {_time(row['runtime_s'], False)}, "
        f"USD {_usd(row['cost_usd'], False)} ({row.get('known') or row['source']})"
        + (f", {row['plan']}" if row.get("plan") else "")
    )


def _ranking(rows: list[dict[str, Any]], total: int, width: int) -> Any:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    wide = width >= 100
    table = Table(
        title=f"Top {len(rows)} of {total}"
        + (" (* screened, not a trial)" if any(r["trial"] is None for r in rows) else ""),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
    )
    table.add_column("#", justify="right")
    table.add_column("machine", max_width=36 if wide else 24, overflow="fold")
    table.add_column("GPUs", justify="right", no_wrap=True)
    table.add_column("batch", justify="right")
    table.add_column("time (interval)" if wide else "time", justify="right", no_wrap=True)
    table.add_column("cost USD", justify="right", no_wrap=True)
    memory = wide and any(r.get("memory") for r in rows)  # issue #34: 80 columns: pick only
    if memory:
        table.add_column("GiB/dev", justify="right", no_wrap=True)
    plans = wide and any(r.get("plan") for r in rows)  # issue #35: the training plan
    if plans:
        table.add_column("plan", overflow="fold")
    table.add_column("known", no_wrap=True)
    for i, r in enumerate(rows, 1):
        known = (r.get("known") or r["source"]) + ("" if r["trial"] is not None else "*")
        cells = [
            str(i),
            escape(machine_label(r)),
            escape(_gpus(r)),
            str(r["batch_size"]),
            _time(r["runtime_s"], wide),
            _usd(r["cost_usd"], False),
            *([escape(_memory_short(r))] if memory else []),
            *([escape(plan_text(r))] if plans else []),
            escape(known + ("" if r["feasible"] else " over")),
        ]
        table.add_row(*cells)
    return table


def plan_text(row: dict[str, Any]) -> str:
    """The row's training plan in words (issue #35): "fp32" for a GPU row without one (the
    plain float32 step), "fp32 (CPU)" without GPUs (trained in float32, as probed)."""
    return row.get("plan") or ("fp32" if row.get("gpus") else "fp32 (CPU)")


def _memory_short(row: dict[str, Any]) -> str:
    """ "21.3/22.0" from "21.3 of 22.0 GiB"; "?" when unknown, "-" without GPUs."""
    text = row.get("memory")
    if not text:
        return "-"
    return (
        "?" if text.startswith("memory unknown") else text.removesuffix(" GiB").replace(" of ", "/")
    )


def warnings(report: dict[str, Any]) -> list[str]:
    """The lines that change what the answer means, most important first: failed probes,
    probes taken while the machine was busy, stale prices."""
    out = [f"Failed probes: {f['text']}." for f in report.get("probe_failures") or []]
    if report.get("memory_left_out"):  # issue #34
        out.append(f"{report['memory_left_out']['text']}.")
    out += list(report.get("contention_notes") or [])
    if report.get("tune_note"):  # issue #36: --tune cut short by a signal or --timeout
        out.append(str(report["tune_note"]))
    if report.get("stale_warning"):
        out.append(stale_line(report["stale_warning"]))
    return out


def stale_line(warning: str) -> str:
    """The catalog's stale-price warning in one short line (the whole of it: --verbose)."""
    found = re.search(r"(\d+) of (\d+) prices used are dated more than (\d+) days ago", warning)
    if found:
        what = f"{found[1]} of {found[2]} are over {found[3]} days old"
    else:
        what = warning.split(";")[0].split(" (")[0].rstrip(".")[:60]
    return f"Prices: {what} (`advisor catalog refresh`)."


def stop_text(report: dict[str, Any]) -> str:
    """Why the search stopped, in a few words ("converged"; a re-run: "resumed (it had
    stopped: converged)")."""
    reason = str(report.get("stop_reason") or "")
    if reason.startswith("resumed"):
        had = re.search(r"stopped \(([^)]*)\)", reason)
        return f"resumed (had {had[1] if had else 'stopped'})"
    return reason.split(";")[0]


def wall_text(report: dict[str, Any]) -> str:
    """The call's whole wall time and what took it (issue #50: the footer counted the search
    alone): "2.1 min (search 39 s, --tune 1.4 min, report 1 s)"; parts under a second left
    out, the largest first."""
    from advisor.durations import format_duration

    wall = float(report.get("wall_s") or 0.0)
    head = f"{wall:.1f} s" if wall < 60 else format_duration(wall)
    parts = sorted((report.get("timings") or {}).items(), key=lambda kv: -float(kv[1]))
    shown = [f"{k} {format_duration(float(v))}" for k, v in parts if float(v) >= 1.0]
    return f"{head} ({', '.join(shown)})" if len(shown) > 1 else head


def render_summary(report: dict[str, Any], console: Console, top: int = TOP_ROWS) -> None:
    """Draw the one-screen report (every value escaped)."""
    from rich.markup import escape

    console.print(escape(_asked(report)), highlight=False)
    rec = report.get("recommended")
    if rec:
        console.print(_pick("recommended", rec), highlight=False)
        conf = report.get("confidence")
        if conf:
            from rich.padding import Padding
            from rich.text import Text

            sure = Text.assemble(("how sure: ", "bold"), confidence_line(conf, short=True))
            console.print(Padding(sure, (0, 0, 0, 2)), highlight=False)
        print_hyperparameters(report, console, "  ", short=True)  # issue #29: --tune
        for line in [
            *value_lines(report),
            *owned_lines(report),
        ]:  # issue #37: --value-of-time's split and front
            console.print(escape(line), highlight=False)
    shown = {id(rec)} if rec else set()
    for label, key in (("fastest", "best_by_time"), ("cheapest", "best_by_cost")):
        row = report.get(key)
        if row and not _same(row, rec):
            console.print(_alternative(label, row), highlight=False)
            shown.add(id(row))
        elif row:
            console.print(f"[bold]{label}:[/] the recommendation", highlight=False)
    rows = report["ranking"][:top]
    if rows:
        console.print(_ranking(rows, report["ranking_total"], console.width))
    lines = warnings(report)
    for line in lines[:WARNINGS_SHOWN]:
        console.print(f"[yellow]{escape(line)}[/]", highlight=False)
    more = len(lines) - WARNINGS_SHOWN
    t = report["trials"]
    trials = f"{t['total']} trial{'' if t['total'] == 1 else 's'}"
    console.print(
        escape(f"{trials}, {stop_text(report)}, {wall_text(report)} - study {report['study']}"),
        highlight=False,
    )
    cloud = report.get("cloud_probes")
    if cloud:
        console.print(escape(cloud_line(cloud)), highlight=False)
    console.print(
        "[dim]More: --verbose"
        + (f" ({more} more warnings)" if more > 0 else "")
        + ", --json, `advisor dashboard`[/]",
        highlight=False,
    )


def cloud_line(cloud: dict[str, Any]) -> str:
    """``--cloud-probes`` in one line: jobs, new ones, the charge, emulated or not (each job's
    row: ``--verbose``)."""
    jobs = cloud.get("jobs") or []
    emulated = sum(1 for j in jobs if j.get("emulated"))
    where = f"; {emulated} emulated here (a local stand-in)" if emulated else ""
    head = f"cloud probes (--cloud-probes {cloud.get('requested', len(jobs))}): "
    # issue #36: why none ran (no credentials, the back end, the budget) is said here, not
    # only under --verbose
    why = [str(s) for s in cloud.get("skipped") or []]
    if not jobs:
        reason = str(cloud.get("stop_reason") or "")
        return head + "none ran: " + "; ".join([*why, reason] if reason else why or ["-"])
    skipped = f"; {why[0]}" + (f" (+{len(why) - 1} more)" if len(why) > 1 else "") if why else ""
    return (
        f"{head}{len(jobs)} job(s) ({cloud.get('new', 0)} new), USD "
        f"{cloud.get('spent_usd', 0.0):.4f} charged to the probe budget{where}{skipped}; each "
        "job's result: --verbose"
    )


def _same(a: dict[str, Any], b: dict[str, Any] | None) -> bool:
    return b is not None and (a["machine"], a["batch_size"]) == (b["machine"], b["batch_size"])
