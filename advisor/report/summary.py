"""The default report of ``advisor suggest``: one screen (80x24 and up).

What it says, in order: what was asked; the recommendation with its time and cost intervals;
how sure it is in plain words (``advisor.report.confidence``); the fastest and the cheapest
alternatives; the top of the ranking; the warnings that change the answer's meaning (failed
or contended probes, stale prices); where the study is and why it stopped; and one line
pointing to the rest (``--verbose`` for the full report, ``--json``, the dashboard).

Issue #50: every line is broken at spaces to the console's width with a hanging indent and no
trailing spaces (``advisor.report.text_table.wrap``), the ranking's columns never wrap and are
narrowed (intervals and plans shortened, memory and then GPUs dropped) until the table fits
(``text_table.fit``), so a machine name is never broken; and the warnings shown are as many as
keep the report within ``SCREEN_LINES``, the rest counted in the last line.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from advisor.durations import format_duration
from advisor.report.confidence import confidence_line
from advisor.report.nodes import lines as nodes_lines
from advisor.report.owned import lines as owned_lines
from advisor.report.tokens import token_lines
from advisor.report.value_of_time import lines as value_lines

if TYPE_CHECKING:
    from rich.console import Console

TOP_ROWS = 5  # ranking rows of the one-screen report (--top changes it)
WARNINGS_SHOWN = 3  # warning lines of the one-screen report (--verbose: all notes)
SCREEN_LINES = 24  # the screen the default report fits (80x24); warnings past it: --verbose


def time_text(d: dict[str, float] | None, interval: bool = True) -> str:
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
    one = f"{row['gpus']}x {row['accelerator']}" if row.get("gpus") else "cpu"
    n = int(row.get("nodes") or 1)  # issue #49
    return f"{n} x {one}" if n > 1 else one  # 2 x 8x H100: two machines of eight


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


def _pick(row: dict[str, Any]) -> list[str]:
    """The recommendation's lines (plain text): the machine, batch and epochs; the plan and
    memory; the run time and cost with their intervals, then the time's two terms."""
    epochs = f", {row['epochs']} epochs" if row.get("epochs") else ""
    head = f"recommended: {machine_label(row)} ({_gpus(row)}), batch {row['batch_size']}{epochs}"
    memory = f"memory {row['memory']} per device" if row.get("memory") else ""
    plan = f"plan: {plan_text(row)}" if row.get("gpus") else ""  # issue #35
    startup = row.get("startup_s")
    split = ""
    if startup and startup["value"] > 0 and row.get("training_s"):
        split = (
            f"; {format_duration(startup['value'])} start-up + "
            f"{format_duration(row['training_s']['value'])} training"
        )
    cost = f"{time_text(row['runtime_s'])}, USD {_usd(row['cost_usd'])}{split}"
    return [head, *(["; ".join(x for x in (plan, memory) if x)] if plan or memory else []), cost]


def _alternative(label: str, row: dict[str, Any], terms: bool = True) -> str:
    """The fastest or cheapest line; ``terms``: with its step's terms on several devices."""
    return (
        f"{label}: {machine_label(row)} b{row['batch_size']}: {time_text(row['runtime_s'], False)}, "
        f"USD {_usd(row['cost_usd'], False)} ({row.get('known') or row['source']})"
        + (f", {row['plan']}" if row.get("plan") else "")
        + (step_text(row.get("step_terms")) if terms else "")
    )


WIDE_TERMS = 100  # columns from which the fastest line carries its step's terms (80x24 fits)


def step_text(terms: dict[str, float] | None) -> str:
    """Issue #47: a step's terms on several devices, largest first, as the fastest line shows
    them ("" for one device or none known)."""
    if not terms or terms.get("devices", 1) < 2:
        return ""
    names = {"dispatch": "host dispatch", "input": "input", "device": "device",
             "allreduce": "all-reduce", "replica": "replica"}  # fmt: skip
    parts = sorted(((terms[k], w) for k, w in names.items() if k in terms), reverse=True)
    listed = ", ".join(f"{w} {v:.2g}" for v, w in parts)
    return f"; step {terms['t2']:.3g} ms on {int(terms['devices'])} devices: {listed} ms"


# The order in which the ranking's columns give way when the table is wider than the terminal
# (issue #50): the plan to its precision, the memory column, the intervals, the plan column,
# the cost's header, the rank numbers, the GPUs (the pick's line names them).
NARROWING = (
    ("short", "plan"), ("drop", "GiB/dev"), ("short", "time (interval)"), ("drop", "plan"),
    ("short", "cost USD"), ("drop", "#"), ("drop", "GPUs"),
)  # fmt: skip


def ranking_lines(rows: list[dict[str, Any]], total: int, width: int) -> list[str]:
    """The top of the ranking as plain lines: its title, then a table that fits ``width``
    (``NARROWING``; every cell whole)."""
    from advisor.report.text_table import Column, fit, table_lines

    def col(header: str, cells: list[str], right: bool = False, **short: Any) -> Column:
        return Column(header, tuple(cells), right, **short)

    cols = [
        col("#", [str(i) for i in range(1, len(rows) + 1)], True),
        col("machine", [machine_label(r) for r in rows]),
        col("GPUs", [_gpus(r) for r in rows], True),
        col("batch", [str(r["batch_size"]) for r in rows], True),
        col("time (interval)", [time_text(r["runtime_s"]) for r in rows], True,
            short=tuple(time_text(r["runtime_s"], False) for r in rows), short_header="time"),
        col("cost USD", [_usd(r["cost_usd"], False) for r in rows], True, short_header="USD"),
    ]  # fmt: skip
    if any(r.get("memory") for r in rows):  # issue #34
        cols.append(col("GiB/dev", [_memory_short(r) for r in rows], True))
    if any(r.get("plan") for r in rows):  # issue #35: the training plan
        cols.append(
            col("plan", [plan_text(r) for r in rows], short=tuple(_plan_short(r) for r in rows))
        )
    known = [
        (r.get("known") or r["source"])
        + ("" if r["trial"] is not None else "*")
        + ("" if r["feasible"] else " over")
        for r in rows
    ]
    cols.append(col("known", known))
    title = f"Top {len(rows)} of {total}" + (
        " (* screened, not a trial)" if any(r["trial"] is None for r in rows) else ""
    )
    return [title, *table_lines(fit(cols, width, NARROWING))]


def _plan_short(row: dict[str, Any]) -> str:
    """The plan in a few characters: the precision, then what else it does ("fp16",
    "bf16 acc4 ckpt zero3"); "fp32" / "cpu" without a plan."""
    plan = row.get("training_plan") or {}
    if not plan:
        return "fp32" if row.get("gpus") else "cpu"
    zero = {"optimizer": "zero1", "gradients": "zero2", "parameters": "zero3"}
    parts = [str(plan.get("precision", "fp32"))]
    if int(plan.get("accumulation") or 1) > 1:
        parts.append(f"acc{plan['accumulation']}")
    if plan.get("checkpointing", "none") != "none":
        parts.append("ckpt")
    if plan.get("sharding", "none") in zero:
        parts.append(zero[plan["sharding"]])
    return " ".join(parts)


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
    """Draw the one-screen report: plain lines wrapped to the console's width (labels in
    bold, warnings in yellow), warnings as many as fit ``SCREEN_LINES``."""
    from rich.text import Text

    from advisor.report.hyperparameters import lines as hyperparameter_lines
    from advisor.report.text_table import wrap

    width = console.width
    head: list[Text] = []

    def say(text: str, indent: int = 0, label: bool = False, style: str = "") -> list[Text]:
        out = [Text(line, style=style) for line in wrap(text, width, indent)]
        if label and out:  # the words before the first colon, in bold
            cut = out[0].plain.find(":")
            out[0].stylize("bold", 0, cut + 1)
        return out

    head += say(_asked(report))
    rec = report.get("recommended")
    if rec:
        first, *rest = _pick(rec)
        head += say(first, label=True)
        for line in [*rest, *token_lines(report, rec)]:  # issue #48: tokens/s, tokens per USD
            head += say(line, 2)
        conf = report.get("confidence")
        if conf:
            head += say("how sure: " + confidence_line(conf, short=True), 2, label=True)
        for line in hyperparameter_lines(report, short=True):  # issue #29: --tune
            head += say(line, 2, label=True)
        for line in [*value_lines(report), *owned_lines(report), *nodes_lines(report)]:  # 37, 49
            head += say(line)
    for label, key in (("fastest", "best_by_time"), ("cheapest", "best_by_cost")):
        row = report.get(key)
        if row and not _same(row, rec):
            # the step's terms where the screen is wide enough (under 100 columns: --json)
            head += say(_alternative(label, row, terms=width >= WIDE_TERMS), label=True)
        elif row:
            head += say(f"{label}: the recommendation", label=True)
    rows = report["ranking"][:top]
    if rows:
        head += [Text(line) for line in ranking_lines(rows, report["ranking_total"], width)]
    t = report["trials"]
    trials = f"{t['total']} trial{'' if t['total'] == 1 else 's'}"
    foot = say(f"{trials}, {stop_text(report)}, {wall_text(report)} - study {report['study']}")
    cloud = report.get("cloud_probes")
    if cloud:
        foot += say(cloud_line(cloud))
    notes = warnings(report)
    shown: list[Text] = []
    count = 0
    for note in notes[:WARNINGS_SHOWN]:  # the first always; the others while the screen holds
        lines = say(note, style="yellow")
        if count and len(head) + len(shown) + len(lines) + len(foot) + 1 > SCREEN_LINES:
            break
        shown += lines
        count += 1
    more = len(notes) - count
    foot += say(
        "More: --verbose" + (f" ({more} more warnings)" if more > 0 else "")
        + ", --json, `advisor dashboard`",
        style="dim",
    )  # fmt: skip
    for printed in [*head, *shown, *foot]:
        console.print(printed, soft_wrap=True, highlight=False)


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
