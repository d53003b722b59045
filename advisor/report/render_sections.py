"""Sections of the full report (``advisor suggest --verbose``) that appear only with some
runs: the imported managed tuning runs, and the cloud probes (issue #14)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.durations import format_duration

if TYPE_CHECKING:
    from rich.console import Console

SKIPPED_SHOWN = 3  # lines of machines the cloud probes skipped (the JSON lists all)


def _money(d: dict[str, float] | None) -> str:
    """USD with cents, or three significant digits below 10 cents (0.00412)."""
    if not d:
        return "-"
    small = 0 < abs(d["value"]) < 0.1
    fmt = ".3g" if small else ".2f"
    return f"{d['value']:{fmt}} ({d['low']:{fmt}}-{d['high']:{fmt}})"


def _hps_text(hps: dict[str, Any], limit: int = 4) -> str:
    parts = []
    for k, v in list(hps.items())[:limit]:
        parts.append(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}")
    return " ".join(parts)


def managed_table(rows: list[dict[str, Any]]) -> Any:
    from rich.markup import escape
    from rich.table import Table

    table = Table(
        title="Managed tuning runs (imported, measured; never the recommendation)",
        title_justify="left",
    )
    for col in (
        "trial",
        "job",
        "machine",
        "status",
        "runtime",
        "cost USD",
        "metric",
        "hyperparameters",
    ):
        table.add_column(col)
    for r in rows:
        metric = r.get("metric") or {}
        value = metric.get("value")
        table.add_row(
            str(r["trial"]),
            escape(str(r["job"])),
            escape(str(r["instance_type"])),
            escape(str(r["status"])),
            format_duration(r["runtime_s"]["value"]) if r["runtime_s"] else "-",
            _money(r["cost_usd"]),
            escape(f"{metric.get('name', '')}={value:.4g}" if value is not None else "-"),
            escape(_hps_text(r["hyperparameters"], 6)),
        )
    return table


def render_cloud(cloud: dict[str, Any], console: Console) -> None:
    """The cloud probes: one row per job, the lines of skipped machines, the stop reason."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(
        title=f"Cloud probes (--cloud-probes {cloud['requested']}): measured on the machine",
        title_justify="left",
    )
    for col in (
        "machine", "batch", "job", "state", "wall", "billed", "cost USD", "step measured",
        "step predicted", "measured / predicted",
    ):  # fmt: skip
        table.add_column(col, justify="left" if col in ("machine", "job", "state") else "right")
    for j in cloud.get("jobs", []):
        state = str(j.get("state"))
        if j.get("emulated"):
            state += " (emulated here)"
        if j.get("cached"):
            state += " (cached, not charged)"
        ratio = j.get("ratio")
        table.add_row(
            escape(str(j["machine"])),
            str(j["batch_size"]),
            escape(str(j.get("job_id") or "-")),
            escape(state),
            _seconds(j.get("wall_s")),
            _seconds(j.get("billed_s")),
            f"{j['cost_usd']:.4f}" if j.get("cost_usd") is not None else "-",
            _step(j.get("measured_step_s")),
            _step(j.get("predicted_step_s")),
            f"x{ratio:.2f}" if ratio else "-",
        )
    if cloud.get("jobs"):
        console.print(table)
    skipped = cloud.get("skipped", [])
    for line in skipped[:SKIPPED_SHOWN]:
        console.print(f"[yellow]{escape(line)}[/]")
    if len(skipped) > SKIPPED_SHOWN:
        more = len(skipped) - SKIPPED_SHOWN
        console.print(f"[yellow]... and {more} more not probed (all listed in --json)[/]")
    console.print(
        escape(
            f"cloud probes: {len(cloud.get('jobs', []))} job(s) ({cloud.get('new', 0)} new), USD "
            f"{cloud.get('spent_usd', 0.0):.4f} charged to the probe budget; stopped: "
            f"{cloud.get('stop_reason') or '-'}"
        )
    )


def _seconds(v: Any) -> str:
    return "-" if v is None else format_duration(float(v))


def _step(v: Any) -> str:
    return "-" if v is None else f"{float(v) * 1e3:.3g} ms"
