"""The first answer's block on the terminal (issue #36): the GPU machines ranked from the
operator trace alone, printed while the local probes run; the final report follows.

``lines(report, top)`` is the plain text (the caller escapes it): a heading that says what the
answer rests on and what it leaves out, the recommendation with its interval, and the next
``top - 1`` rows of its ranking.
"""

from __future__ import annotations

from typing import Any

from advisor.report.summary import time_text

HEADING = (
    "first answer (from the operator trace: GPU machines only, their init a prior; the local "
    "probes run now, the final answer follows)"
)


def _row(row: dict[str, Any]) -> str:
    c = row["cost_usd"]
    return (
        f"{row['machine']} batch {row['batch_size']}: {time_text(row['runtime_s'])}, "
        f"USD {c['value']:.3f} ({c['low']:.3f}-{c['high']:.3f})"
    )


def lines(report: dict[str, Any], top: int = 3) -> list[str]:
    """The block's lines (none without a recommendation)."""
    shown = block(report, top)
    if shown is None:
        return []
    return [
        HEADING,
        f"  recommended: {_row(shown['recommended'])}",
        *(f"  then: {_row(r)}" for r in shown["ranking"]),
    ]


def block(report: dict[str, Any], top: int = 3) -> dict[str, Any] | None:
    """What ``lines(report, top)`` shows and no more (a service job carries it with its
    progress, issue #46): the recommendation and the next rows of its ranking; None without
    a recommendation."""
    rec = report.get("recommended")
    if not rec:
        return None
    keep = ("machine", "batch_size", "runtime_s", "cost_usd")
    rows = [
        {k: r[k] for k in keep}
        for r in report.get("ranking") or []
        if (r["machine"], r["batch_size"]) != (rec["machine"], rec["batch_size"])
    ]
    return {"recommended": {k: rec[k] for k in keep}, "ranking": rows[: max(0, top - 1)]}


def print_block(report: dict[str, Any], console: Any, top: int = 3) -> None:
    """Print ``lines(report, top)`` on a rich console, each broken at spaces to its width
    with a hanging indent and no trailing spaces (issue #50), then a blank line."""
    from rich.text import Text

    from advisor.report.text_table import wrap

    text = lines(report, top)
    for i, line in enumerate(text):
        indent = len(line) - len(line.lstrip())
        for part in wrap(line.lstrip(), console.width, indent):
            console.print(Text(part, style="bold" if i == 0 else ""), soft_wrap=True)
    if text:
        console.print()
