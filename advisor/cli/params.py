"""Click parameter types shared by every command: inputs are checked where they enter.

``FiniteFloat`` and ``BoundedInt`` refuse NaN, infinities and values out of range;
``Duration`` reads 2h / 90m / 3600s into finite positive seconds; ``WritablePath`` checks that
an output file can be written *before* the command does its work (a typo in ``--out`` must not
cost a finished search). A bad value is a click usage error: exit 2, one line (see ``main``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from advisor.durations import parse_duration
from advisor.errors import AdvisorError

FC = TypeVar("FC", bound=Callable[..., Any])


def _range_text(
    low: float | int | None, high: float | int | None, low_open: bool, high_open: bool
) -> str:
    def fmt(v: float | int) -> str:
        return str(v) if isinstance(v, int) else f"{v:g}"

    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {fmt(low)}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {fmt(high)}")
    return " and ".join(parts) or "finite"


class FiniteFloat(click.ParamType):
    """A finite float in [low, high] (either end may be open or absent)."""

    name = "number"

    def __init__(
        self,
        low: float | None = None,
        high: float | None = None,
        low_open: bool = False,
        high_open: bool = False,
    ) -> None:
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float) and not isinstance(value, bool):
            number = value
        else:
            try:
                number = float(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a number.", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        low, high = self.low, self.high
        if (low is not None and (number < low or (self.low_open and number == low))) or (
            high is not None and (number > high or (self.high_open and number == high))
        ):
            rng = _range_text(low, high, self.low_open, self.high_open)
            self.fail(f"{number:g} is out of range: it must be {rng}.", param, ctx)
        return number


class BoundedInt(click.ParamType):
    """An integer in [low, high] (written in decimal; no floats, NaN or bools)."""

    name = "integer"

    def __init__(self, low: int | None = None, high: int | None = None) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value).strip()
            if not re.fullmatch(r"[+-]?\d{1,18}", text):
                self.fail(f"{value!r} is not a whole number.", param, ctx)
            number = int(text)
        if (self.low is not None and number < self.low) or (
            self.high is not None and number > self.high
        ):
            rng = _range_text(self.low, self.high, False, False)
            self.fail(f"{number} is out of range: it must be {rng}.", param, ctx)
        return number


class Threads(BoundedInt):
    """A thread count for a probe on this machine: 1 to its cores (more threads than cores
    only contend with each other, and thousands of them stall the machine)."""

    def __init__(self) -> None:
        super().__init__(1, None)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from advisor.probes.host import cores

        number = super().convert(value, param, ctx)
        if number > cores():
            self.fail(
                f"{number} is more than the {cores()} cores of this machine: give at most "
                f"{cores()} (default: all of them).",
                param,
                ctx,
            )
        return number


class EpochsAt(click.ParamType):
    """``B=N``: N epochs to target seen at batch size B (issue #19). Returns ``(B, N)``."""

    name = "B=N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        match = re.fullmatch(r"\s*(\d{1,9})\s*=\s*(\d{1,6})\s*", str(value))
        if not match or min(int(match[1]), int(match[2])) < 1:
            self.fail(
                f"{value!r} is not B=N with a batch size B and epochs N >= 1 (e.g. 256=13).",
                param,
                ctx,
            )
        return int(match[1]), int(match[2])


class Duration(click.ParamType):
    """A positive duration written 2h, 90m, 1h30m, 3600s or 3600 (seconds), at most a year
    (``advisor.durations.parse_duration``). Returns seconds as a float."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float | int) and not isinstance(value, bool):
            value = f"{value}s"
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class WritablePath(click.ParamType):
    """An output file path whose folder exists and is writable, checked before the work.

    An existing file must be a writable regular file; ``suffixes`` (e.g. ``(".png",)``), when
    given, are the endings accepted. Returns a ``Path``."""

    name = "file"

    def __init__(self, suffixes: tuple[str, ...] = ()) -> None:
        self.suffixes = suffixes

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = str(value)
        if not text.strip() or "\x00" in text:
            self.fail(f"{value!r} is not a file name.", param, ctx)
        path = Path(text).expanduser()
        if self.suffixes and path.suffix.lower() not in self.suffixes:
            self.fail(f"{text} must end in {' or '.join(self.suffixes)}.", param, ctx)
        if path.is_dir() or text.endswith(("/", os.sep)):
            self.fail(f"{text} is a folder; give a file name in it.", param, ctx)
        if path.exists():
            if not path.is_file():
                self.fail(f"{text} exists and is not a regular file.", param, ctx)
            if not os.access(path, os.W_OK):
                self.fail(f"{text} is not writable.", param, ctx)
            return path
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            self.fail(f"the folder {folder} does not exist (create it first).", param, ctx)
        if not os.access(folder, os.W_OK | os.X_OK):
            self.fail(f"the folder {folder} is not writable.", param, ctx)
        return path


class StudyName(click.ParamType):
    """A study name a user may write into: not empty, not too long for Optuna's table (512),
    no control characters, and not a name the advisor keeps for itself."""

    name = "name"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from advisor.evaluation.local import PROBE_CACHE_STUDY

        text = str(value)
        if not text.strip() or len(text) > 500 or any(ord(c) < 32 for c in text):
            self.fail(
                f"{value!r} is not a usable study name (1-500 printable characters).", param, ctx
            )
        if text.strip() == PROBE_CACHE_STUDY:
            self.fail(
                f"'{PROBE_CACHE_STUDY}' is the advisor's internal probe cache; pick another name.",
                param,
                ctx,
            )
        return text


class ModelRef(click.ParamType):
    """A built-in workload name, or a user model written ``package.module:function``
    (``advisor.search_spaces.workloads.ModelRef``: only the form is checked here, since
    importing a user's module may load a framework). Returns the ``ModelRef``."""

    name = "model"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from advisor.search_spaces.workloads import ModelRef as Ref

        try:
            return Ref(str(value))
        except AdvisorError as exc:
            self.fail(exc.problem, param, ctx)


# Shared instances: the same limit means the same thing in every command.
USD = FiniteFloat(0.0, 1e9, low_open=True)  # budgets and prices: > 0
USD_OR_ZERO = FiniteFloat(0.0, 1e9)  # a probe budget may be 0 (use what is cached)
SEED = BoundedInt(0, 2**32 - 1)  # numpy's seeds are 32-bit
THREADS = Threads()  # at most this machine's cores (issue #28)
POSITIVE = BoundedInt(1, 10**9)  # epochs, batch sizes, samples, trials
EPOCHS_AT = EpochsAt()
COUNT_OR_ZERO = BoundedInt(0, 10**9)
PORT = BoundedInt(1, 65535)
GPUS = BoundedInt(0, 1024)


# -- options more than one command takes: declared once, the same choices and help everywhere --


def frameworks() -> tuple[str, ...]:
    """The frameworks a probe can train with (``advisor.probes.runner.FRAMEWORK_ENTRY``)."""
    from advisor.probes.runner import FRAMEWORK_ENTRY

    return tuple(FRAMEWORK_ENTRY)


def framework_option() -> Callable[[FC], FC]:
    """``--framework``: one of the probe runners' frameworks, torch by default."""
    from advisor.options import OPTIONS

    return click.option(
        "--framework",
        type=click.Choice(frameworks()),
        default="torch",
        show_default=True,
        help=OPTIONS["framework"].help,
    )


def storage_option(**extra: Any) -> Callable[[FC], FC]:
    """``--storage``: the Optuna storage URL (studies, probe cache, calibration ledger);
    ``extra`` adds click settings (``advisor serve``'s environment variable and help)."""
    from advisor.options import OPTIONS

    kwargs: dict[str, Any] = {"default": None, "help": OPTIONS["storage"].help, **extra}
    return click.option("--storage", "storage", **kwargs)


def iterations_option() -> Callable[[FC], FC]:
    """``--iterations`` of a probe (``advisor probe``, ``advisor estimate``)."""
    return click.option(
        "--iterations",
        type=BoundedInt(3, 10_000),
        default=20,
        show_default=True,
        help="Training iterations timed (the first is warm-up).",
    )


def timeout_option() -> Callable[[FC], FC]:
    """``--timeout`` of the user code a command runs (``advisor probe``, ``predict``): wall
    seconds (issue #50: the probe's counted CPU time, and a trace had none)."""
    return click.option(
        "--timeout",
        type=FiniteFloat(0.1, 366 * 86400.0),
        default=300.0,
        show_default=True,
        help="Wall-clock seconds the probe, and each trace of the model, may take before it "
        "is stopped.",
    )


def threads_option(
    help: str = "CPU threads of the probe (default: all cores).",
) -> Callable[[FC], FC]:
    """``--threads`` of a probe, at most this machine's cores."""
    return click.option("--threads", type=THREADS, default=None, help=help)
