"""Tables and paragraphs that fit the terminal (issue #50): at 80 columns `advisor suggest`
broke machine names mid-word over two lines and padded every line with spaces, and `advisor
predict` wrapped each cell over five lines at 100.

A ``Column`` never wraps: each has a full form and, optionally, a shorter one (a value without
its interval, an abbreviated header) and a place in the order in which columns are shortened
or dropped when the table is wider than the terminal (``fit``). ``table_lines`` draws what is
left as plain lines -- a header, a rule, the rows, two spaces between columns -- with no
trailing spaces; a machine name is one cell and so is never broken. ``wrap`` breaks a
paragraph at spaces only, with a hanging indent and no trailing spaces (rich's own wrapping
keeps the space at each break and pads indented blocks to the full width).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace

GAP = 2  # spaces between columns


@dataclass(frozen=True)
class Column:
    """One column: its ``header`` and ``cells``; ``right`` justified or left; ``short`` /
    ``short_header``, the narrower form ``fit`` may switch to."""

    header: str
    cells: tuple[str, ...]
    right: bool = False
    short: tuple[str, ...] | None = None
    short_header: str | None = None

    def width(self) -> int:
        return max(len(c) for c in (self.header, *self.cells))

    def shortened(self) -> Column:
        return replace(
            self,
            cells=self.short if self.short is not None else self.cells,
            header=self.short_header or self.header,
            short=None,
            short_header=None,
        )


def table_width(columns: Sequence[Column]) -> int:
    return sum(c.width() for c in columns) + GAP * max(len(columns) - 1, 0)


def fit(columns: Sequence[Column], width: int, steps: Sequence[tuple[str, str]]) -> list[Column]:
    """The columns, narrowed step by step until the table fits ``width`` (``narrow``)."""
    return narrow(columns, width, steps)[0]


def narrow(
    columns: Sequence[Column], width: int, steps: Sequence[tuple[str, str]]
) -> tuple[list[Column], list[tuple[str, str]]]:
    """The columns narrowed until the table fits ``width``, and the steps that were taken:
    each step ``("short", header)`` switches that column to its short form, ``("drop",
    header)`` leaves it out. Steps run in the order given and stop as soon as the table fits;
    a table that still does not fit keeps every cell whole (the terminal wraps the line,
    never a name)."""
    out = list(columns)
    taken: list[tuple[str, str]] = []
    for action, header in steps:
        if table_width(out) <= width:
            break
        at = next((i for i, c in enumerate(out) if header in (c.header, c.short_header)), None)
        if at is None:
            continue
        if action == "drop":
            del out[at]
        else:
            out[at] = out[at].shortened()
        taken.append((action, header))
    return out, taken


def table_lines(columns: Sequence[Column]) -> list[str]:
    """The header, a rule as wide as the table, and one line per row; no trailing spaces."""
    widths = [c.width() for c in columns]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(w) if col.right else cell.ljust(w)
            for col, cell, w in zip(columns, cells, widths, strict=True)
        ]
        return (" " * GAP).join(parts).rstrip()

    rows = len(columns[0].cells) if columns else 0
    return [
        line([c.header for c in columns]),
        "\u2500" * table_width(columns),
        *(line([c.cells[i] for c in columns]) for i in range(rows)),
    ]


def wrap(text: str, width: int, indent: int = 0, hanging: int = 2) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` characters, the first
    indented by ``indent``, the others by ``indent + hanging``; a word longer than a line
    (a path, a URL) stays whole. Newlines in ``text`` start new paragraphs."""
    out: list[str] = []
    for part in text.split("\n"):
        lines = textwrap.wrap(
            part,
            width=max(width, indent + hanging + 20),
            initial_indent=" " * indent,
            subsequent_indent=" " * (indent + hanging),
            break_long_words=False,
            break_on_hyphens=False,
        )
        out += lines or [""]
    return out
