"""Draw ``advisor suggest``'s report (``advisor.report.build_report``) with rich, and plot it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.report import duration_text

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


def _runtime_text(d: dict[str, float] | None) -> str:
    if not d:
        return "-"
    return f"{duration_text(d['value'])} ({duration_text(d['low'])}-{duration_text(d['high'])})"


def _hps_text(hps: dict[str, Any], limit: int = 4) -> str:
    parts = []
    for k, v in list(hps.items())[:limit]:
        parts.append(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}")
    return " ".join(parts)


def _table(title: str, rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col, kw in (
        ("#", {"justify": "right"}),
        ("machine", {"no_wrap": True}),
        ("GPUs", {"justify": "right"}),
        ("capacity", {}),
        ("batch", {"justify": "right"}),
        ("runtime (interval)", {"justify": "right"}),
        ("cost USD (interval)", {"justify": "right"}),
        ("source", {}),
    ):
        table.add_column(col, **kw)
    for i, r in enumerate(rows, 1):
        gpus = f"{r['gpus']}x {r['accelerator']}" if r["gpus"] else "cpu"
        table.add_row(
            str(i),
            r["machine"].removesuffix(":spot"),
            gpus,
            "spot" if r["spot"] else "on demand",
            str(r["batch_size"]),
            _runtime_text(r["runtime_s"]),
            _money(r["cost_usd"]),
            r["source"] + ("" if r["feasible"] else " [over limit]"),
        )
    return table


def render(report: dict[str, Any], console: Console, top: int = 15) -> None:
    """Draw the report with rich."""
    from rich.table import Table

    console.print(
        f"[bold]{report['workload']}[/] ({report['framework']}), objective "
        f"[bold]{report['objective']}[/]"
        + (f", budget USD {report['budget_usd']:g}" if report["budget_usd"] else "")
        + (f", deadline {duration_text(report['deadline_s'])}" if report["deadline_s"] else "")
        + f", epochs: {report['epochs']}, catalog {report['catalog_snapshot']}"
    )
    console.print(
        _table(f"Ranking (top {top} of {report['ranking_total']})", report["ranking"][:top])
    )
    picks = [
        ("recommended", report["recommended"]),
        ("fastest", report["best_by_time"]),
        ("cheapest", report["best_by_cost"]),
    ]
    for label, row in picks:
        if row:
            console.print(
                f"[bold]{label}:[/] {row['machine']} batch {row['batch_size']} "
                f"{_hps_text(row['hyperparameters'], 8)} - {_runtime_text(row['runtime_s'])}, "
                f"USD {_money(row['cost_usd'])}, {row['source']}"
            )
    local = report.get("local")
    if local:
        console.print(
            f"[bold]this machine:[/] rank {local['rank']} of {report['ranking_total']}, batch "
            f"{local['batch_size']} - {_runtime_text(local['runtime_s'])}, {local['source']}"
        )
    console.print(_table("Pareto set (time vs cost)", report["pareto"]))
    sweep = report.get("epoch_sweep")
    if sweep:
        table = Table(
            title="Epoch sweep: runtime / cost relative to the best machine per column",
            title_justify="left",
        )
        table.add_column("candidate")
        for ep in sweep["epochs"]:
            table.add_column(f"{ep} ep", justify="right")
        for label, row in sweep["runtime_normalised"].items():
            costs = sweep["cost_normalised"].get(label, {})
            table.add_row(
                label,
                *[
                    f"{row[ep]:.2f}x / {costs[ep]:.2f}x" if ep in costs else f"{row[ep]:.2f}x / -"
                    for ep in sweep["epochs"]
                ],
            )
        console.print(table)
    t, p = report["trials"], report["probes"]
    console.print(
        f"study {report['study']} ({'resumed' if report['resumed'] else 'new'}) in "
        f"{report['storage']}: {t['total']} trials ({t['new']} new, {t['failed']} failed, "
        f"{t['pruned']} pruned); {p['new']} new probes; probe budget spent USD "
        f"{p['spent_usd']:.4f} of {p['budget_usd']:.2f}; stopped: {report['stop_reason']}; "
        f"{report['wall_s']:.1f} s"
    )
    for note in report["notes"]:
        console.print(f"[dim]{note}[/]")


def plot(report: dict[str, Any], path: str) -> None:
    """Cost vs runtime scatter with interval error bars and the Pareto front (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report["ranking"] if r["runtime_s"] and r["cost_usd"]]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for group, colour in (("on demand", "tab:blue"), ("spot", "tab:orange")):
        pts = [r for r in rows if r["spot"] == (group == "spot")]
        if not pts:
            continue
        x = [r["runtime_s"]["value"] / 3600 for r in pts]
        y = [r["cost_usd"]["value"] for r in pts]
        xerr = [
            [(r["runtime_s"]["value"] - r["runtime_s"]["low"]) / 3600 for r in pts],
            [(r["runtime_s"]["high"] - r["runtime_s"]["value"]) / 3600 for r in pts],
        ]
        yerr = [
            [r["cost_usd"]["value"] - r["cost_usd"]["low"] for r in pts],
            [r["cost_usd"]["high"] - r["cost_usd"]["value"] for r in pts],
        ]
        ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", color=colour, alpha=0.6, label=group)
    front = sorted(report["pareto"], key=lambda r: r["runtime_s"]["value"])
    if front:
        ax.plot(
            [r["runtime_s"]["value"] / 3600 for r in front],
            [r["cost_usd"]["value"] for r in front],
            "k--",
            label="Pareto front",
        )
        for r in front:
            ax.annotate(
                f"{r['machine'].split(':')[1]} b{r['batch_size']}",
                (r["runtime_s"]["value"] / 3600, r["cost_usd"]["value"]),
                fontsize=7,
            )
    if report.get("budget_usd"):
        ax.axhline(report["budget_usd"], color="red", lw=0.8, label="budget")
    if report.get("deadline_s"):
        ax.axvline(report["deadline_s"] / 3600, color="purple", lw=0.8, label="deadline")
    ax.set_xlabel("estimated runtime (h)")
    ax.set_ylabel("estimated cost (USD)")
    ax.set_title(f"{report['workload']}: cost vs runtime ({report['study']})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
