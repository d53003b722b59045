"""The console the commands print to."""

from __future__ import annotations

from typing import Any

PIPED_WIDTH = 200  # piped output keeps one table row per line instead of wrapping at 80


def console(stderr: bool = False) -> Any:
    """A rich Console: ``COLUMNS`` wide when set (issue #36: a report for an 80-column
    terminal or file), else the terminal's width, or ``PIPED_WIDTH`` when output is piped."""
    import os

    from rich.console import Console

    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and 20 <= int(columns) <= 10_000:
        return Console(stderr=stderr, width=int(columns))
    probe = Console(stderr=stderr)
    return Console(stderr=stderr, width=None if probe.is_terminal else PIPED_WIDTH)
