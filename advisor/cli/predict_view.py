"""What `advisor predict` prints: the header, the machines' table, the plans and limits, the
fastest and cheapest, the run time and cost by epochs, each at the terminal's width.

Issue #50: at 100 columns the twelve-column table wrapped every cell over five lines. The table
now never wraps a cell (``advisor.report.text_table``): it drops its intervals and its less
needed columns, in the order of ``NARROWING``, until it fits, and says what it left out; the
paragraphs are broken at spaces with no trailing spaces. ``--json`` holds everything.
"""

from __future__ import annotations

from typing import Any

from advisor.cli import console as output
from advisor.durations import format_duration
from advisor.report.text_table import Column, narrow, table_lines, wrap

# The order in which the table gives way when wider than the terminal: the intervals of the
# step and training times, the start-up (the job's time holds it) and the per-GPU batch, the
# source and memory in short, the step time, the cost's interval, the training time (the job's
# holds it), the job's interval, what limits the step, the source, the rank number.
NARROWING = (
    ("short", "training"), ("short", "t2 ms"), ("drop", "start-up s"), ("drop", "b/GPU"),
    ("short", "source"), ("short", "memory/device"), ("drop", "t2 ms"),
    ("short", "job cost USD"), ("drop", "training"), ("short", "job"), ("drop", "limit"),
    ("drop", "source"), ("drop", "#"), ("drop", "memory/device"), ("drop", "GPUs"),
)  # fmt: skip
FOOTNOTE = (
    "[interval] in brackets; modelled = predicted from the local probe (docs/calibration.md); "
    "probed here, extrapolated = this machine's probe over the run; limit = what bounds the "
    "step; memory/device = the step's predicted peak per GPU against its memory (CPU machines: "
    "RAM); start-up = provisioning or VM boot, image pull, data download before training "
    "(priors unless documented, providers/overheads.py); job = start-up + training (what "
    "advisor suggest ranks); job cost = billed start-up + training, rounded once to the "
    "service's billing increment and minimum; the tables below are whole jobs too."
)


def say(text: str, indent: int = 0) -> None:
    """``text`` broken at spaces to the terminal's width, printed as it is (no markup)."""
    for line in wrap(text, output.console().width, indent):
        put(line)


def put(line: str) -> None:
    """One line as it is: no markup, no wrapping, no padding (a table's line)."""
    from rich.text import Text

    output.console().print(Text(line), soft_wrap=True, highlight=False)


def _gpus(f: Any, accelerator: str | None) -> str:
    """ "8x A100" on one machine; "4 x 8x A100" on four (issue #49)."""
    if not accelerator:
        return "-"
    one = f"{f.machine.accelerator_count}x {accelerator}"
    nodes = getattr(f, "nodes", 1)
    return f"{nodes} x {one}" if nodes > 1 else one


def print_table(rows: list[Any], tables: dict[str, Any], header: str) -> None:
    """Everything `advisor predict` prints of ``rows`` (the predict API's rows, fastest
    first) and ``tables`` (runtime and cost by epochs, each over its best)."""
    width = output.console().width
    say(header)
    shown, taken = narrow(machines_columns(rows), width, NARROWING)
    for line in table_lines(shown):
        put(line)
    left = _left_out(taken)
    if left:
        say(f"(left out at {width} columns: {left}; a wider terminal or --json shows them)")
    print_limits_and_calibration(rows)
    say(FOOTNOTE)
    from advisor.evaluation.predict_api import job_cost

    fitting = [f for f in rows if f.fits]
    if not fitting:  # issue #34
        say(
            "None of these machines is known to fit a step at this batch size in its memory "
            "(the memory/device column: an upper estimate must fit): no fastest or cheapest; "
            "try a smaller --batch-size, a --plan (accumulation, checkpointing, sharding) or "
            "a machine with more GPU memory."
        )
        return
    fastest, cheapest = fitting[0], min(fitting, key=job_cost)
    say(
        f"Fastest: {fastest.machine.key}   Cheapest: {cheapest.machine.key} "
        "(whole jobs: start-up included; machines that fit their GPU memory)"
    )
    for kind in ("runtime", "cost"):
        norm = tables[kind]
        cols = sorted({c for row in norm.values() for c in row})
        say(f"{kind} / best, by epochs")
        table = [Column("machine", tuple(norm))] + [
            Column(f"{c} ep", tuple(_ratio(row.get(c)) for row in norm.values()), True)
            for c in cols
        ]
        for line in table_lines(table):
            put(line)


def machines_columns(rows: list[Any]) -> list[Column]:
    """The machines' table in full, each column with its short form (no interval)."""

    def col(header: str, full: list[str], short: list[str] | None = None, **kw: Any) -> Column:
        return Column(header, tuple(full), short=None if short is None else tuple(short), **kw)

    def cells(get: Any, fmt: str) -> tuple[list[str], list[str]]:
        spans = [get(f) if f.fits or f.memory_unknown else None for f in rows]
        return [_span(s, fmt) for s in spans], [_value(s, fmt) for s in spans]

    gpu = [f.machine.accelerator for f in rows]
    t2 = cells(lambda f: f.prediction.phases.t2.scale(1000), "{:.1f}")
    training = cells(lambda f: f.job.training if f.job is not None else f.estimate.runtime, "")
    startup = cells(lambda f: None if f.overheads is None else f.overheads.wall, "{:.0f}")
    job = cells(lambda f: f.job_wall_s, "")
    cost = cells(lambda f: f.job_cost_usd, "{:.2f}")
    memory = ["-" if f.memory is None else f.memory.text() for f in rows]
    return [
        col("#", [str(i) for i in range(1, len(rows) + 1)], right=True),
        col("machine", [f.machine.key for f in rows]),
        col("GPUs", [_gpus(f, a) for f, a in zip(rows, gpu, strict=True)], right=True),
        col("b/GPU", [str(f.prediction.per_device_batch) if a else "-"
                      for f, a in zip(rows, gpu, strict=True)], right=True),
        col("t2 ms", *t2, right=True),
        col("training", *training, right=True),
        col("source", [_source(f) for f in rows], [_source(f, short=True) for f in rows]),
        col("limit", [f.prediction.bottleneck or "-" for f in rows]),
        col("memory/device", memory, [_memory_short(m) for m in memory], right=True,
            short_header="GiB/dev"),
        col("start-up s", *startup, right=True),
        col("job", *job, right=True),
        col("job cost USD", *cost, right=True, short_header="USD"),
    ]  # fmt: skip


def _left_out(taken: list[tuple[str, str]]) -> str:
    """What ``narrow`` left out, in words ("start-up s, b/GPU, limit, intervals")."""
    dropped = [header for action, header in taken if action == "drop" and header != "#"]
    spans = {"t2 ms", "training", "job", "job cost USD"}
    short = any(action == "short" and header in spans for action, header in taken)
    return ", ".join([*dropped, *(["intervals"] if short else [])])


def _source(f: Any, short: bool = False) -> str:
    from advisor.evaluation.candidates import predicted_only

    pred, machine = f.prediction, f.machine
    text = "probed here, extrapolated" if pred.source == "measured" else pred.source
    if short:
        text = "here" if pred.source == "measured" else text.split(",")[0]
    text += f" x{pred.calibration:.2f}" if pred.calibration_points else ""
    if short:
        return text
    return (
        text
        + ("" if machine.current else f" ({machine.lifecycle})")
        + (" (predicted only)" if predicted_only(machine) is not None else "")
    )


def _memory_short(text: str) -> str:
    """ "21.3/22.0" from "21.3 of 22.0 GiB"; "no fit" for a step that does not fit."""
    if text.startswith("does not fit"):
        return "no fit"
    if text.startswith("memory unknown"):
        return "?"
    return text.removesuffix(" GiB").replace(" of ", "/")


def _ratio(value: float | None) -> str:
    """A cell of a ``/ best`` table: a free machine (cost 0) is "free", never a ratio."""
    if value is None:
        return "-"
    return "free" if value == 0 else f"{value:.2f}"


def _format(value: float, fmt: str) -> str:
    return fmt.format(value) if fmt else format_duration(value)


def _span(span: Any, fmt: str) -> str:
    """A value with its interval, "9.3 [5.3-16.3]"; "-" without one."""
    if span is None:
        return "-"
    return f"{_format(span.value, fmt)} [{_format(span.low, fmt)}-{_format(span.high, fmt)}]"


def _value(span: Any, fmt: str) -> str:
    return "-" if span is None else _format(span.value, fmt)


def row_plan(row: Any) -> str:
    """A row's training plan in words (issue #35): its plan, "fp32" for a GPU's plain float32
    step (a K80 under ``--precision auto``), "fp32 (CPU, as probed)" for a CPU machine."""
    if row.prediction.plan:
        return str(row.prediction.plan)
    return "fp32" if row.machine.accelerator else "fp32 (CPU, as probed)"


def print_limits_and_calibration(rows: list[Any]) -> None:
    """Name the host-bound machines (the GPU's speed does not decide their time) and show
    each calibration with its evidence (advisor calibration lists them all)."""
    from advisor.prediction.timing.accel import LIMITS

    plans = [f"{f.machine.key}: {row_plan(f)}" for f in rows]
    if any(f.prediction.plan for f in rows):  # every row's plan, once one has a plan
        say(f"Training plan: {'; '.join(plans)}.")
    for limit in ("dispatch", "input"):
        floor = [f.machine.key for f in rows if f.prediction.bottleneck == limit]
        if floor:
            say(
                f"{LIMITS[limit]}: {', '.join(floor)} (the host floor's priors decide these "
                "times; the interval carries them)."
            )
    for f in rows:
        if f.prediction.calibration_points:
            say(f"{f.machine.key}: {f.prediction.calibration_evidence}")
