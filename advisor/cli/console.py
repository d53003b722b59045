"""The console the commands print to."""

from __future__ import annotations

from typing import Any

PIPED_WIDTH = 200  # piped output keeps one table row per line instead of wrapping at 80


def console(stderr: bool = False) -> Any:
    """A rich Console: the terminal's width, or ``PIPED_WIDTH`` when output is piped."""
    from rich.console import Console

    probe = Console(stderr=stderr)
    return Console(stderr=stderr, width=None if probe.is_terminal else PIPED_WIDTH)
