"""Draw ``advisor suggest``'s report (``advisor.report.build.build_report``) with rich: one
screen by default (``advisor.report.summary``), everything with ``verbose`` (the plot:
``advisor.report.plot``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.durations import format_duration
from advisor.evaluation.ranking import TIE_SHARE
from advisor.report.confidence import confidence_line
from advisor.report.epochs import render_epochs  # issue #19
from advisor.report.hyperparameters import print_lines as print_hyperparameters
from advisor.report.nodes import lines as nodes_lines
from advisor.report.owned import lines as owned_lines
from advisor.report.render_sections import managed_table, render_cloud
from advisor.report.summary import TOP_ROWS, plan_text, render_summary, wall_text
from advisor.report.value_of_time import lines as value_lines

if TYPE_CHECKING:
    from rich.console import Console


def _iv(d: dict[str, float] | None, fmt: str, scale: float = 1.0) -> str:
    if not d:
        return "-"
    v, lo, hi = d["value"] * scale, d["low"] * scale, d["high"] * scale
    return f"{v:{fmt}} ({lo:{fmt}}-{hi:{fmt}})"


def _money(d: dict[str, float] | None) -> str:
    """USD with cents, or three significant digits below 10 cents (0.00412)."""
    if not d:
        return "-"
    small = 0 < abs(d["value"]) < 0.1
    return _iv(d, ".3g" if small else ".2f")


def _money_short(d: dict[str, float] | None) -> str:
    """``_money`` for a table cell: below 10 cents, the bounds to two digits."""
    if not d or not 0 < abs(d["value"]) < 0.1:
        return _money(d)
    return f"{d['value']:.3g} ({d['low']:.2g}-{d['high']:.2g})"


def _runtime_text(d: dict[str, float] | None) -> str:
    if not d:
        return "-"
    return (
        f"{format_duration(d['value'])} ({format_duration(d['low'])}-{format_duration(d['high'])})"
    )


def _time_iv(d: dict[str, float] | None) -> str:
    """A run time with its interval in the value's unit: "5.8 min (5.1-7.5)"."""
    if not d:
        return "-"
    unit, size = next((u, n) for u, n in (("h", 3600.0), ("min", 60.0), ("s", 1.0))
                      if d["value"] >= n or u == "s")  # fmt: skip
    fmt = ".0f" if unit == "s" else (".2f" if unit == "h" else ".1f")
    lo, hi = d["low"] / size, d["high"] / size
    return f"{d['value'] / size:{fmt}} {unit} ({lo:{fmt}}-{hi:{fmt}})"


def _startup_text(r: dict[str, Any]) -> str:
    """Issue #14: the start-up term of a row ("none" on this machine, "-" when unknown)."""
    d = r.get("startup_s")
    if not d:
        return "-"
    return "none" if d["value"] <= 0 else format_duration(d["value"])


def _training_text(r: dict[str, Any]) -> str:
    d = r.get("training_s")
    return format_duration(d["value"]) if d else "-"


def _hps_text(hps: dict[str, Any], limit: int = 4) -> str:
    parts = []
    for k, v in list(hps.items())[:limit]:
        parts.append(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}")
    return " ".join(parts)


def _price_text(r: dict[str, Any], dated: bool) -> str:
    price = r.get("price_per_hour")
    if price is None:
        return "-"
    if r.get("service") == "local":
        return "0 (yours)"
    if not dated:
        return f"{price:.3g}"
    return (
        f"{price:.3g} ({r.get('price_basis') or 'price'} {r.get('price_date') or '?'})"  # issue #27
    )


def _price_dates(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({str(r.get("price_date") or "?") for r in rows if r.get("service") != "local"})


def _table(title: str, rows: list[dict[str, Any]], width: int = 200) -> Any:
    """The ranking in about 120 characters: time = start-up + training (issue #14), the price
    (USD/h) and its date in the pick lines and the JSON, cost and time with intervals."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(
        title=escape(title),
        title_justify="left",
        caption="time = start-up + training; start-up = provisioning, image pull or VM boot, "
        "data download (see the notes)\n(screen) = predicted by the screen, not a trial",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=width >= 110,
        padding=(0, 1) if width >= 110 else (0, 0),
    )
    fold = {"overflow": "fold"}
    # a console narrower than 135 columns wraps the intervals under their values
    wide = width >= 135
    narrow: dict[str, Any] = {"no_wrap": True} if wide else {"min_width": 9, **fold}
    money: dict[str, Any] = {"no_wrap": True} if wide else {"min_width": 14, **fold}
    memory = any(r.get("memory") for r in rows)  # issue #34: rows of a back end that knows it
    plans = any(r.get("plan") for r in rows)  # issue #35: the training plan of GPU rows
    columns: tuple[tuple[str, dict[str, Any]], ...] = (
        ("#", {"justify": "right"}),
        ("machine", {"min_width": 15 if width >= 110 else 12, "max_width": 26, **fold}),
        ("GPUs", {"justify": "right", "no_wrap": width >= 110}),
        ("batch", {"justify": "right"}),
        ("start-up", {"justify": "right", "no_wrap": True}),  # issue #14
        ("training", {"justify": "right", "no_wrap": True}),
        ("time (interval)", {"justify": "right", **narrow}),
        ("cost USD", {"justify": "right", **money}),
        ("limited by", {"min_width": 8, "ratio": 1, **fold}),
        *([("memory/device", {"justify": "right", **fold})] if memory else []),
        *([("plan", {"min_width": 8, "ratio": 1, **fold})] if plans else []),
        ("known", {"min_width": 8, "ratio": 1, **fold}),  # issue #14: legend below
    )
    for col, kw in columns:
        table.add_column(escape(col), **kw)
    for i, r in enumerate(rows, 1):
        gpus = f"{r['gpus']}x {r['accelerator']}" if r["gpus"] else "cpu"
        table.add_row(
            str(i),
            escape(r["machine"].removesuffix(":spot") + (" spot" if r["spot"] else "")),
            escape(gpus),
            str(r["batch_size"]),
            _startup_text(r),
            _training_text(r),
            _time_iv(r["runtime_s"]),
            _money_short(r["cost_usd"]),
            escape(r.get("limiting") or "-"),
            *([escape(r.get("memory") or "-")] if memory else []),
            *([escape(plan_text(r))] if plans else []),
            escape(_known_text(r, width)),
        )
    return table


def _known_text(r: dict[str, Any], width: int = 200) -> str:
    """How a row's time is known (the legend's key; the full source is in the JSON), marked
    "(screen)" when no trial evaluated it and "[over limit]" when it breaks a limit."""
    text = r.get("known") or r["source"]
    if r["source"].endswith("screen only"):
        text += " (screen)"
    over = "\n[over limit]" if width >= 110 else "\n[over\nlimit]"
    return text + ("" if r["feasible"] else over)


def _pick_line(label: str, row: dict[str, Any]) -> str:
    from rich.markup import escape

    hps = _hps_text(row["hyperparameters"], 8)
    startup = row.get("startup_s")
    parts = ""
    if startup and startup["value"] > 0:  # issue #14
        parts = f" = {_startup_text(row)} start-up + {_training_text(row)} training"
    return f"[bold]{label}:[/] " + escape(
        f"{row['machine']} batch {row['batch_size']}{_epochs_text(row)}"
        f"{' ' + hps if hps else ''} - "
        f"{_runtime_text(row['runtime_s'])}{parts}, USD {_money(row['cost_usd'])} at "
        f"{_price_text(row, True)} USD/h, {row['source']}"
    )


def _epochs_text(row: dict[str, Any]) -> str:
    """ ", 14 epochs" for a pick line (issue #19: the run length behind its time and cost)."""
    epochs = row.get("epochs")
    return f", {epochs} epochs" if epochs else ""


def render(
    report: dict[str, Any], console: Console, top: int | None = None, verbose: bool = False
) -> None:
    """Draw the report with rich (every value escaped: "[interval]" stays text): the one
    screen (``top`` ranking rows, default 5), or with ``verbose`` the full report (default
    15 rows)."""
    if not verbose:
        render_summary(report, console, top or TOP_ROWS)
        return
    _render_full(report, console, top or 15)


def _render_full(report: dict[str, Any], console: Console, top: int) -> None:
    from rich.markup import escape
    from rich.table import Table

    console.print(
        escape(
            f"{report['workload']} ({report['framework']}), objective {report['objective']}"
            + (f", budget USD {report['budget_usd']:g}" if report["budget_usd"] else "")
            + (
                f", deadline {format_duration(report['deadline_s'])}"
                if report["deadline_s"]
                else ""
            )
            + f", epochs: {report['epochs']}, catalog {report['catalog_snapshot']}"
        )
    )
    if report.get("stale_warning"):
        console.print(f"[yellow]{escape(report['stale_warning'])}[/]")
    console.print(
        _table(
            f"Ranking (top {top} of {report['ranking_total']})",
            report["ranking"][:top],
            console.width,
        )
    )
    _render_known(report, console)  # issue #14
    rec = report["recommended"]
    if rec:
        console.print(_pick_line("recommended", rec))
        console.print(f"  [bold]why:[/] {escape(rec['reason'])}")
        if report.get("confidence"):
            console.print(f"  [bold]how sure:[/] {escape(confidence_line(report['confidence']))}")
        if rec.get("region_note"):
            console.print(f"  [bold]priced in:[/] {escape(rec['region_note'])}")
        for line in [
            *value_lines(report),
            *owned_lines(report),
            *nodes_lines(report),  # issue #49
        ]:  # issue #37: --value-of-time's split and front
            console.print(f"  {escape(line)}")
        ranges = report.get("tuned_ranges") or {}
        tuned = print_hyperparameters(report, console, "  ")  # issue #29: --tune's runs
        if ranges and not tuned:
            console.print(
                "  [bold]tuning ranges[/] (not judged by this study; advisor submit hands "
                "them to the tuning job): "
                + escape(", ".join(f"{k} {v}" for k, v in ranges.items()))
            )
    for label, key in (("fastest", "best_by_time"), ("cheapest", "best_by_cost")):
        if report[key]:
            console.print(_pick_line(label, report[key]))
    local = report.get("local")
    if local:
        console.print(
            escape(
                f"this machine: rank {local['rank']} of {report['ranking_total']}, batch "
                f"{local['batch_size']} - {_runtime_text(local['runtime_s'])}, {local['source']}"
            )
        )
    for row in report.get("measured_elsewhere") or []:  # issue #14: remote probes' places
        console.print(
            escape(
                f"{row['known']} on the machine: {row['machine']} batch {row['batch_size']}, "
                f"rank {row['rank']} of {report['ranking_total']} - "
                f"{_runtime_text(row['runtime_s'])}, {row['source']}"
            )
        )
    render_epochs(report.get("epochs_per_batch") or [], console)  # issue #19
    console.print(
        _table(
            f"Pareto set (time vs cost, sorted; points within {TIE_SHARE:.0%} merged)",
            report["pareto"],
            console.width,
        )
    )
    sweep = report.get("epoch_sweep")
    if sweep:
        table = Table(
            title="Epoch sweep: run time (start-up included) relative to the fastest per column "
            "/ cost in USD",
            title_justify="left",
        )
        table.add_column("candidate")
        for ep in sweep["epochs"]:
            table.add_column(f"{ep} ep", justify="right")
        for label, row in sweep["runtime_normalised"].items():
            costs = sweep["cost_usd"].get(label, {})
            # a report read back from JSON (--server) has its epochs as string keys
            row = {int(k): v for k, v in row.items()}
            costs = {int(k): v for k, v in costs.items()}
            table.add_row(
                escape(label),
                *[
                    f"{row[ep]:.2f}x / " + (f"{costs[ep]:.3g}" if ep in costs else "-")
                    for ep in sweep["epochs"]
                ],
            )
        console.print(table)
    if report.get("managed"):
        console.print(managed_table(report["managed"]))
    if report.get("cloud_probes"):
        render_cloud(report["cloud_probes"], console)  # issue #14
    t, p = report["trials"], report["probes"]
    console.print(
        escape(
            f"study {report['study']} ({'resumed' if report['resumed'] else 'new'}) in "
            f"{report['storage']}: {t['total']} trials ({t['new']} new, {t['failed']} failed, "
            f"{t['pruned']} pruned); {p['new']} new probes; probe budget spent USD "
            f"{p['spent_usd']:.4f} of {p['budget_usd']:.2f}; stopped: {report['stop_reason']}; "
            f"{wall_text(report)}"
        )
    )
    for note in report.get("contention_notes") or []:
        console.print(f"[yellow]{escape(note)}[/]")
    for note in report["notes"]:
        console.print(f"[dim]{escape(note)}[/]")


# -- issue #14: how each time is known, and the cloud probes ---------------------------------


def _render_known(report: dict[str, Any], console: Console) -> None:
    """The legend of the "known" column: only the kinds the ranking shows."""
    from rich.markup import escape

    legend = report.get("known_legend") or {}
    shown = {r.get("known") for r in report["ranking"]}
    parts = [f"{k} = {v}" for k, v in legend.items() if k in shown]
    if parts:
        console.print(f"[dim]known: {escape('; '.join(parts))}[/]")
