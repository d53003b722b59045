"""The framework-neutral probe result and the timing values built from it."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, get_args

from advisor.intervals import Interval

ProbeStatus = Literal["ok", "oom", "nan", "timeout", "killed", "error"]
PROBE_STATUSES: tuple[str, ...] = get_args(ProbeStatus)
Source = Literal["measured", "modelled"]


@dataclass(frozen=True)
class ProbeResult:
    """What one probe measured for one (workload, batch size, device, threads).

    Times are seconds. ``iteration_s`` holds each of the first k training iterations in order
    (index 0 is the first, warm-up iteration). ``validation_s`` holds the first and second
    validation passes, already scaled to the full validation set when only a slice of
    ``validation_samples_measured`` samples was run (``validation_scale`` is that factor).
    A failed probe has ``status != "ok"`` (oom: out of memory; nan: the loss diverged;
    timeout: it ran past its timeout; killed: a signal ended it; error: anything else) and
    ``error`` says why in one line (also as :attr:`reason`); its timings may be empty.
    """

    workload: str
    framework: str
    batch_size: int
    device: str
    threads: int
    status: ProbeStatus = "ok"
    error: str | None = None
    init_s: float = 0.0
    iteration_s: tuple[float, ...] = ()
    validation_s: tuple[float, ...] = ()
    validation_samples_measured: int = 0
    validation_scale: float = 1.0
    n_train: int = 0  # dataset sizes used for extrapolation (the workload's real sizes)
    n_val: int = 0
    flops_per_iteration: float | None = None
    parameters: int | None = None
    gradient_bytes: int | None = None
    peak_host_memory_bytes: int | None = None
    peak_accelerator_memory_bytes: int | None = None
    samples_per_s: float | None = None
    cpu_utilisation: float | None = None  # mean busy fraction of the cores used, 0..1
    wall_s: float = 0.0  # the probe's own wall time (what it cost to run)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    # Data preparation inside init: ``data_s`` seconds for ``data_samples`` samples generated
    # or loaded by the probe. ``init_s`` already scales it to n_train + n_val; estimates for
    # other dataset sizes rescale it (None: unknown, not scaled).
    data_s: float | None = None
    data_samples: int = 0
    # What the probe noticed that may make a real run differ from it (one line each).
    warnings: tuple[str, ...] = ()
    # Issue #19: the gradient noise scale B_simple measured after the timed iterations
    # (``advisor.probes.gradient_noise.NoiseScale.to_dict()``); None when not measured.
    gradient_noise: dict[str, Any] | None = None
    # Issue #26: the operator trace of one training step at this batch size
    # (``advisor.probes.operators.OperatorTrace.to_dict()``), traced once and kept with the
    # probe so it is never recomputed; None when not traced.
    operator_trace: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, but got {self.batch_size}")
        if self.status == "ok" and len(self.iteration_s) < 2:
            raise ValueError(
                f"an ok probe needs at least 2 iterations, but got {len(self.iteration_s)}"
            )

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def reason(self) -> str:
        """Why the probe failed, in one line ("" for an ok probe)."""
        return "" if self.ok else one_line(self.error or self.status)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeResult:
        """The inverse of :meth:`to_dict`, validated: a corrupt record (unknown or missing
        fields, negative, NaN or string timings) raises ValueError with a one-line reason."""
        return cls(**_checked(data))

    @classmethod
    def from_json(cls, text: str) -> ProbeResult:
        return cls.from_dict(json.loads(text))

    @classmethod
    def failure(
        cls,
        request: ProbeRequest,
        status: ProbeStatus,
        error: str,
        wall_s: float,
        framework: str | None = None,
        threads: int | None = None,
        **measured: Any,
    ) -> ProbeResult:
        """A failed probe of ``request`` (status oom/nan/error/timeout/crash) with its reason."""
        return cls(
            workload=request.workload,
            framework=framework or request.framework,
            batch_size=request.batch_size,
            device=request.device,
            threads=threads or request.threads or os.cpu_count() or 1,
            status=status,
            error=one_line(error),
            wall_s=wall_s,
            **measured,
        )


def one_line(text: str, limit: int = 500) -> str:
    """``text`` on one line (whitespace runs folded), cut to ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


_TIMINGS = ("init_s", "wall_s", "data_s")
_TIMING_LISTS = ("iteration_s", "validation_s")
_COUNTS = ("validation_samples_measured", "n_train", "n_val", "data_samples")
_OPTIONAL = (
    "flops_per_iteration",
    "parameters",
    "gradient_bytes",
    "peak_host_memory_bytes",
    "peak_accelerator_memory_bytes",
    "samples_per_s",
    "cpu_utilisation",
)


# Bounds on what a probe record may hold (issue #36: a probe file with an n_train of 1e30 or
# iteration times that overflow to infinity gave absurd estimates or tracebacks). The sample
# bound is the CLI's own (--n-train, --n-val: advisor/cli/params.py POSITIVE); no single timed
# phase of a probe lasts longer than MAX_PROBE_SECONDS; batch sizes are the space's bound.
MAX_SAMPLES = 10**9
# About 3 years: a stand-in CPU step of an 8B LM at batch 2048 x 2048 tokens is 1.6e6 s (#48).
MAX_PROBE_SECONDS = 1e8
MAX_BATCH = 2**20
MAX_THREADS = 2**16


def _number(name: str, value: Any, high: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"probe field {name} must be a finite number, but got {value!r}")
    if value < 0:
        raise ValueError(f"probe field {name} must be >= 0, but got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"probe field {name} must be <= {high:g}, but got {value!r}")
    return value


def check_count(name: str, value: Any, low: int = 0, high: int = MAX_SAMPLES) -> int:
    """``value`` as probe field ``name``: an integer from ``low`` to ``high``, else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(
            f"probe field {name} must be an integer from {low} to {high:,}, but got {value!r}"
        )
    return value


def _checked(data: Any) -> dict[str, Any]:
    """``data`` as ProbeResult keyword arguments, after checking every field's type and range."""
    if not isinstance(data, dict):
        raise ValueError(f"a probe result must be a JSON object, but got {type(data).__name__}")
    known = {f.name for f in fields(ProbeResult)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown probe field(s): {', '.join(map(str, unknown))}")
    missing = [
        k for k in ("workload", "framework", "batch_size", "device", "threads") if k not in data
    ]
    if missing:
        raise ValueError(f"probe field(s) missing: {', '.join(missing)}")
    out = dict(data)
    for key in ("workload", "framework", "device"):
        if not isinstance(out[key], str):
            raise ValueError(f"probe field {key} must be a string, but got {out[key]!r}")
    check_count("batch_size", out["batch_size"], 1, MAX_BATCH)
    check_count("threads", out["threads"], 1, MAX_THREADS)
    status = out.get("status", "ok")
    if status not in PROBE_STATUSES:
        raise ValueError(f"probe status must be one of {', '.join(PROBE_STATUSES)}, got {status!r}")
    for key in _TIMINGS:
        if out.get(key) is not None:
            _number(key, out[key], MAX_PROBE_SECONDS)
    for key in _COUNTS:
        if key in out:
            check_count(
                key, out[key], high=2 * MAX_SAMPLES if key == "data_samples" else MAX_SAMPLES
            )
    for key in _OPTIONAL:
        if out.get(key) is not None:
            _number(key, out[key])
    for key in _TIMING_LISTS:
        values = out.get(key, ())
        if not isinstance(values, list | tuple):
            raise ValueError(f"probe field {key} must be a list of seconds, but got {values!r}")
        out[key] = tuple(_number(f"{key}[{i}]", v, MAX_PROBE_SECONDS) for i, v in enumerate(values))
    if "validation_scale" in out and not _number("validation_scale", out["validation_scale"]) > 0:
        raise ValueError("probe field validation_scale must be > 0")
    warnings = out.get("warnings", ())
    if not isinstance(warnings, list | tuple) or not all(isinstance(w, str) for w in warnings):
        raise ValueError(f"probe field warnings must be a list of strings, but got {warnings!r}")
    out["warnings"] = tuple(warnings)
    if not isinstance(out.get("fingerprint", {}), dict):
        raise ValueError("probe field fingerprint must be an object")
    if out.get("gradient_noise") is not None:  # issue #19: a NoiseScale.to_dict()
        from advisor.probes.gradient_noise import NoiseScale

        try:
            NoiseScale.from_dict(out["gradient_noise"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"probe field gradient_noise: {exc}") from None
    if out.get("operator_trace") is not None:  # issue #26: an OperatorTrace.to_dict()
        from advisor.probes.operators.types import OperatorTrace

        try:
            OperatorTrace.from_dict(out["operator_trace"])
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"probe field operator_trace: {exc}") from None
    return out


@dataclass(frozen=True)
class PhaseTimes:
    """The per-phase times the iteration-time model needs, each with an interval.

    ``source`` says whether they were measured on the machine or modelled for it.
    ``t1`` is the first iteration, ``t2`` the steady iteration, ``v1``/``v2`` the first and
    second validation passes over the full validation set.
    """

    init: Interval
    t1: Interval
    t2: Interval
    v1: Interval
    v2: Interval
    source: Source = "measured"
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "init": self.init.to_dict(),
            "t1": self.t1.to_dict(),
            "t2": self.t2.to_dict(),
            "v1": self.v1.to_dict(),
            "v2": self.v2.to_dict(),
            "source": self.source,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PhaseTimes:
        """The inverse of ``to_dict``."""
        return cls(
            init=Interval.from_dict(data["init"]),
            t1=Interval.from_dict(data["t1"]),
            t2=Interval.from_dict(data["t2"]),
            v1=Interval.from_dict(data["v1"]),
            v2=Interval.from_dict(data["v2"]),
            source=data.get("source", "measured"),
            note=data.get("note", ""),
        )


# fingerprint key: the training DataLoader's CPU seconds per batch (the input pipeline's host
# term of a GPU row), read by the probe after its timed steps or, for a probe without it,
# when a GPU row is first predicted from it (``advisor.prediction.step.ready``)
LOADER_KEY = "data_s"
MIN_PROBE_ITERATIONS = 5  # a time-boxed probe still times this many (4 steady samples)


@dataclass(frozen=True)
class ProbeRequest:
    """What to probe. Sent as JSON to the child process that runs the probe.

    ``workload`` is a built-in workload name or a user import path ``module:function``.
    ``iterations`` is k, the number of training iterations timed (the first is warm-up).
    ``validation_batches`` bounds the validation slice run per pass (None: the whole
    generated validation set); the result scales it to the workload's full ``n_val``.
    ``process_start`` is the wall-clock (``time.time()``) when the child process was
    started, so initialisation includes interpreter start and imports; ``process_cpu_start``
    the process's CPU clock (``time.process_time()``) at that start (0.0 in a fresh child;
    None: not known, the initialisation is then wall time only).
    ``max_seconds`` time-boxes the timed iterations (every framework): once at least ``MIN_PROBE_ITERATIONS``
    have run and this many seconds have passed since the first batch was ready, the probe
    stops early (large batches on slow machines); the result holds the iterations it timed.
    ``gradient_noise`` also measures the gradient noise scale on a few more batches, untimed
    (:mod:`advisor.probes.gradient_noise`).
    """

    workload: str
    batch_size: int
    framework: str = "torch"
    iterations: int = 20
    threads: int | None = None
    device: str = "cpu"
    validation_batches: int | None = 4
    seed: int = 0
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 300.0
    process_start: float | None = None
    process_cpu_start: float | None = None  # issue #36: initialisation in CPU time too
    max_seconds: float | None = None
    gradient_noise: bool = True  # issue #19: measure B_simple after the timed iterations

    def __post_init__(self) -> None:
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, but got {self.batch_size}")
        if self.iterations < 3:
            raise ValueError(f"iterations must be >= 3, but got {self.iterations}")
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise ValueError(f"max_seconds must be > 0, but got {self.max_seconds}")
        if self.threads is not None and self.threads <= 0:
            raise ValueError(f"threads must be > 0, but got {self.threads}")

    def stop_early(self, done: int, elapsed_s: float) -> bool:
        """Whether a time-boxed probe that has timed ``done`` iterations in ``elapsed_s`` stops."""
        return (
            self.max_seconds is not None
            and done >= MIN_PROBE_ITERATIONS
            and elapsed_s >= self.max_seconds
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ProbeRequest:
        return cls(**json.loads(text))
