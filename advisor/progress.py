"""Progress of long work (issue #50): what is being done, how far it is, and what is left.

A stage that may take more than a few seconds reports ``progress(phase, done, total)``
(``Progress``): the suggest study's ``screen``, ``trials``, ``probe:TEXT`` and ``cloud:TEXT``
(``advisor.study.run``), the first answer's ``first:TEXT`` (``advisor.pipeline``), ``--tune``'s
``tune:TEXT`` (in seconds of its budget, ``advisor.accuracy.search``). A phase ``KIND:TEXT``
shows TEXT on the KIND line; a phase without a colon is one of ``KINDS`` (or shown as sent).

``Meter`` turns those calls into a ``Reading`` per stage: its label, its count, the time since
it began, and the time left from the *measured* rate -- the items done since the stage began
over the seconds that took -- never from a guess: ``left_s`` is None ("estimating...") until an
item is done and time has passed. Where the total is only an upper bound (``Kind.bound``: the
trial loop stops on its own when nothing can improve) the time left is "at most".
``PlainLines`` writes readings as plain lines for a log (off a terminal): none in the first
``quiet_s`` (a quick command stays clean), then one when a stage begins and at most one every
``every_s`` seconds, and ``tick()`` (a timer calls it) repeats the current stage when nothing
was written for ``every_s``: no silent minutes, never a flood. The terminal's live line
(``advisor.cli.progress``) shows the same readings.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar, overload

from advisor.durations import format_duration

Progress = Callable[[str, int, int], None]
Clock = Callable[[], float]
T = TypeVar("T")

EVERY_S = 10.0  # a plain line at most this often within one stage
QUIET_S = 3.0  # nothing in the first seconds: a quick command prints no progress


@dataclass(frozen=True)
class Kind:
    """How a stage is shown: ``label`` (formatted with ``total``), the unit of its count
    (``"s"``: seconds of a time budget), and whether its total is an upper bound."""

    label: str
    unit: str = ""
    bound: bool = False


KINDS: dict[str, Kind] = {
    "screen": Kind("screening {total:,} machine x batch pairs (a local probe per new batch size)"),
    # the screen's second pass (advisor.study.screen): the pairs left are mostly beaten before
    # their search, in milliseconds, so the rate of the first ones gives an upper bound
    "plans": Kind(
        "searching the plans of {total:,} pairs whose plain plan does not fit", bound=True
    ),
    "trials": Kind("trials (up to {total}; a new machine or batch size may probe)", bound=True),
    "cloud": Kind("cloud probes (up to {total} machines, each a managed job)", bound=True),
    "tune": Kind("short training runs (--tune)", unit="s"),
}


def kind_of(phase: str) -> str:
    """The stage a phase belongs to: ``probe:probing batch 512`` -> ``probe``."""
    return phase.split(":", 1)[0]


def kind(phase: str) -> Kind:
    return KINDS.get(kind_of(phase), Kind(""))


def label(phase: str, total: int) -> str:
    """What a stage is called: a known phase by name, ``KIND:TEXT`` as TEXT, else as sent."""
    if ":" in phase:
        return phase.split(":", 1)[1]
    known = KINDS.get(phase)
    return known.label.format(total=total) if known else phase


class ScreenProgress:
    """The screen's progress, counted where its time goes (issue #50). A GPU pair's forecast
    traces the step at its per-GPU batch (and the micro-batches of its plan), once per size for
    the whole screen; a pair whose per-GPU batch was forecast before takes milliseconds. So the
    screen counts the per-GPU batch sizes (the first pair of each done), the pairs done said in
    its words: counted in pairs, GPT-2 Large's screen, a few slow pairs and then hundreds of
    fast ones, read "about 22.90 h left" 21 minutes into a screen of half an hour. Without GPU
    rows it counts the pairs.

    ``pairs`` are (accelerator or None, its count, batch size) in the screen's order."""

    def __init__(self, progress: Progress, pairs: list[tuple[str | None, int, int]]) -> None:
        self.progress, self.n = progress, len(pairs)
        self.sizes = list(dict.fromkeys(b for _, _, b in pairs))
        self.groups = [b // count if acc and count else None for acc, count, b in pairs]
        self.total = len({g for g in self.groups if g is not None})
        self.seen: set[int] = set()

    def label(self, done: int, batch: int | None) -> str:
        """'screening 1,468 machine x batch pairs, 10 done (batch 256: 1 of 4); per-GPU batch
        sizes forecast'."""
        head = f"screening {self.n:,} machine x batch pairs"
        if batch is not None:
            head += f", {done:,} done (batch {batch}: {self.sizes.index(batch) + 1} of "
            head += f"{len(self.sizes)})"
        return f"{head}; per-GPU batch sizes forecast" if self.total else head

    def before(self, i: int, batch: int | None, note: str = "") -> None:
        """Tell the pair ``i`` starts (``len(pairs)``: all done; ``note``: what runs first)."""
        text = self.label(i, batch) + (f": first, {note}" if note else "")
        if self.total:
            self.progress(f"screen:{text}", len(self.seen), self.total)
        else:
            self.progress(f"screen:{text}", i, self.n)

    def after(self, i: int) -> None:
        group = self.groups[i]
        if group is not None:
            self.seen.add(group)


@dataclass(frozen=True)
class Reading:
    """One stage at one moment: ``left_s`` None while the rate is not measured yet."""

    key: str
    label: str
    done: int
    total: int
    elapsed_s: float
    left_s: float | None
    unit: str = ""
    bound: bool = False
    idle_s: float = 0.0  # since the stage's last word

    @property
    def count_text(self) -> str:
        """'1,204 of 5,872 (21%)', '95 of 180 s'; nothing for a single step."""
        if self.total <= 1 and self.unit != "s":
            return ""
        if self.unit == "s":
            return f"{format_duration(self.done)} of {format_duration(self.total)}"
        return f"{self.done:,} of {self.total:,} ({100 * self.done / self.total:.0f}%)"

    @property
    def left_text(self) -> str:
        """'about 4.3 min left', 'at most 12 min left', 'estimating...'."""
        if self.left_s is None:
            return "estimating..."
        if self.done >= self.total > 0:  # what follows it has not spoken yet
            return "done" if self.idle_s < 1 else f"done, {format_duration(self.idle_s)} since"
        return f"{'at most' if self.bound else 'about'} {format_duration(self.left_s)} left"

    def text(self) -> str:
        """The reading in one line (without the command's clock)."""
        count = f": {self.count_text}" if self.count_text else ""
        return f"{self.label}{count}; {format_duration(self.elapsed_s)} in, {self.left_text}"


@dataclass
class _Stage:
    key: str
    label: str
    total: int
    started: float  # when it began (its first call)
    done0: int  # its count then
    done: int
    at: float  # the last call
    counting: float  # the last call before its count moved: the rate is measured from there


class Meter:
    """Stages and their measured rates (see the module docstring)."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self.stages: dict[str, _Stage] = {}
        self.current: str | None = None

    def update(self, phase: str, done: int, total: int) -> Reading:
        now = self.clock()
        key = kind_of(phase)
        text = label(phase, total)
        stage = self.stages.get(key)
        # a stage (re)begins: new, counted back, another total, or back after another stage
        # with nothing counted yet (suggest's screen after the first answer and the probes)
        back = key != self.current and stage is not None and done == stage.done0
        if stage is None or done < stage.done or total != stage.total or back:
            stage = _Stage(key, text, total, now, done, done, now, now)
            self.stages[key] = stage
        if done == stage.done0:  # nothing counted yet (a stage's preparation is no item)
            stage.counting = now
        stage.label, stage.done, stage.at = text, done, now
        self.current = key
        return self._read(stage, now)

    def reading(self, key: str | None = None, now: float | None = None) -> Reading | None:
        """The stage ``key`` (default: the last one heard) at ``now``."""
        stage = self.stages.get(key or self.current or "")
        if stage is None:
            return None
        return self._read(stage, self.clock() if now is None else now)

    def _read(self, stage: _Stage, now: float) -> Reading:
        spec = KINDS.get(stage.key, Kind(""))
        return Reading(
            stage.key,
            stage.label,
            stage.done,
            stage.total,
            max(0.0, now - stage.started),
            _left(stage, now),
            spec.unit,
            spec.bound,
            max(0.0, now - stage.at),
        )


def _left(stage: _Stage, now: float) -> float | None:
    """Seconds left at the rate measured from the stage's counting start until ``now`` (a step
    that takes long slows the rate as it goes: the time left grows, never runs out while items
    are left); None until the rate is measured."""
    items, seconds = stage.done - stage.done0, max(stage.at, now) - stage.counting
    if stage.done >= stage.total > 0:
        return 0.0
    if items <= 0 or stage.at <= stage.counting:
        return None
    left = (stage.total - stage.done) * seconds / items
    return left if math.isfinite(left) else None


class PlainLines:
    """``Progress`` as plain lines through ``write`` (see the module docstring); thread-safe:
    ``tick`` may be called from a timer while the work reports."""

    def __init__(
        self,
        write: Callable[[str], None],
        clock: Clock = time.monotonic,
        *,
        every_s: float = EVERY_S,
        quiet_s: float = QUIET_S,
    ) -> None:
        self.write, self.clock = write, clock
        self.every_s, self.quiet_s = every_s, quiet_s
        self.meter = Meter(clock)
        self.began = clock()
        self.last_line: float | None = None
        self.last_key: str | None = None
        self.lock = threading.Lock()

    def __call__(self, phase: str, done: int, total: int) -> None:
        with self.lock:
            reading = self.meter.update(phase, done, total)
            self._maybe(reading, new_stage=reading.key != self.last_key)

    def tick(self) -> None:
        """Repeat the current stage when no line was written for ``every_s``."""
        with self.lock:
            reading = self.meter.reading()
            if reading is not None:
                self._maybe(reading, new_stage=False)

    def _maybe(self, reading: Reading, new_stage: bool) -> None:
        now = self.clock()
        if now - self.began < self.quiet_s:
            return
        since = math.inf if self.last_line is None else now - self.last_line
        if since >= self.every_s or new_stage:
            self.write(f"[{_clock_text(now - self.began)}] {reading.text()}")
            self.last_line, self.last_key = now, reading.key


def _clock_text(seconds: float) -> str:
    """'1:05', '1:02:05'."""
    s = int(seconds)
    return (
        f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )


class Ticker:
    """Calls ``tick`` every ``every_s`` real seconds in a daemon thread until stopped (a
    context manager): a plain-lines reporter speaks even while one step takes minutes."""

    def __init__(self, tick: Callable[[], None], every_s: float = EVERY_S) -> None:
        self.tick, self.every_s = tick, every_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="advisor-progress", daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(self.every_s):
            self.tick()

    def __enter__(self) -> Ticker:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=1.0)


class _Counted(Sequence[T]):
    """A sequence whose iteration reports ``progress(phase, i, n)`` before each item and
    ``(n, n)`` after the last."""

    def __init__(self, items: Sequence[T], progress: Progress, phase: str) -> None:
        self.items, self.progress, self.phase = items, progress, phase

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[T]: ...
    def __getitem__(self, i: int | slice) -> T | Sequence[T]:
        return self.items[i]

    def __iter__(self) -> Iterator[T]:
        n = len(self.items)
        for i, item in enumerate(self.items):
            self.progress(self.phase, i, n)
            yield item
        self.progress(self.phase, n, n)


def counted(items: Sequence[T], progress: Progress | None, phase: str) -> Sequence[T]:
    """``items``, reporting each as it is reached to ``progress`` (as is, without one): the
    loop of a function that takes no ``progress`` of its own reports through it."""
    return items if progress is None else _Counted(items, progress, phase)
