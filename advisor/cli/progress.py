"""Progress on stderr for the commands that may take long (issue #50): a live line on a
terminal, plain lines off one (``advisor.progress``: the same readings, the time left from
the measured rate, "estimating..." until it is measured). stdout is left to the answer, so
``--json`` stays one document."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from advisor.progress import Clock, Meter, PlainLines, Progress, Ticker

FRESH_S = 60.0  # a process older than this at a command's start is not that command's own


def process_start_up() -> float:
    """Seconds this process ran before the call: the interpreter's start and the imports of a
    command (Linux: the start time in ``/proc``); 0 elsewhere, and in a process older than
    ``FRESH_S`` (one that runs commands in turn: tests, a notebook)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start, in ticks
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0
    return age if 0.0 <= age <= FRESH_S else 0.0


def on_terminal() -> bool:
    """Whether stderr is a terminal (the live line) or not (plain lines)."""
    return sys.stderr.isatty()


@contextlib.contextmanager
def reporting(clock: Clock | None = None, *, quiet_s: float | None = None) -> Iterator[Progress]:
    """A ``Progress`` for the work inside the block: the live line on a terminal, else plain
    lines on stderr (a timer repeats the current stage while one step takes long). ``clock``:
    what the rates are measured on (default the wall clock; a replayed search's simulated
    one)."""
    clock = clock or time.monotonic
    if on_terminal():
        with _live(clock) as hook:
            yield hook
        return
    kw = {} if quiet_s is None else {"quiet_s": quiet_s}
    lines = PlainLines(lambda text: click.echo(text, err=True), clock, **kw)
    with Ticker(lines.tick):
        yield lines


@contextlib.contextmanager
def _live(clock: Clock) -> Iterator[Progress]:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.table import Column
    from rich.text import Text

    meter = Meter(clock)

    class Left(ProgressColumn):
        """The count and the time left, from ``meter`` (the same words as the plain lines)."""

        def render(self, task: Any) -> Text:
            reading = meter.reading(task.fields.get("key"))
            if reading is None:
                return Text("")
            count = f"{reading.count_text}  " if reading.count_text else ""
            return Text(f"{count}{reading.left_text}")

    tasks: dict[str, Any] = {}
    with Progress(
        SpinnerColumn(),
        TextColumn(
            "{task.description}",
            table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"),
        ),
        BarColumn(bar_width=12),
        TimeElapsedColumn(),
        Left(table_column=Column(no_wrap=True)),
        console=Console(stderr=True),
        transient=True,
        expand=True,
    ) as bar:

        def hook(phase: str, done: int, total: int) -> None:
            reading = meter.update(phase, done, total)
            text = escape(reading.label)
            if reading.key not in tasks:
                tasks[reading.key] = bar.add_task(text, total=total, key=reading.key)
            for key, task in tasks.items():  # the stage at work, one line
                bar.update(task, visible=key == reading.key)
            bar.update(tasks[reading.key], completed=done, total=total, description=text)

        yield hook
