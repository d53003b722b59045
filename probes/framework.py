"""The framework-runner base: one probe loop, time box and failure classification for all.

A probe times a few real training iterations and two validation passes of a workload, in the
child process started by :func:`advisor.probes.runner.run_probe`. :class:`FrameworkRunner` is
a small template in the style of Optuna's samplers: its public method
:meth:`~FrameworkRunner.probe_in_process` is the same for every framework, and a framework
fills in the hooks.

Contract for a framework (``probes/torch_runner.py`` and ``probes/keras_runner.py`` are the two):

- :meth:`~FrameworkRunner.configure` sets threads and device before anything is built and
  returns the number of threads in use.
- :meth:`~FrameworkRunner.prepare` builds the workload for the request: a :class:`Prepared`
  with the framework's own state and the dataset sizes to extrapolate to.
- :meth:`~FrameworkRunner.run_iterations` runs at most ``request.iterations`` training steps
  with the framework's own timing hook, calling :meth:`TimeBox.after_step` after each step
  and stopping when it returns True; it returns the :class:`Timed` steps.
- :meth:`~FrameworkRunner.validation_pass` runs one (bounded) validation pass:
  ``(seconds, samples run)``.
- :meth:`~FrameworkRunner.flops`, :meth:`~FrameworkRunner.model_size` and
  :meth:`~FrameworkRunner.fingerprint` describe the model and the software.
- :meth:`~FrameworkRunner.is_oom` says whether an exception is the framework's out-of-memory
  error (by type); :data:`MemoryError` always is.
- :meth:`~FrameworkRunner.input_bytes_per_sample` (optional, issue #27) measures the bytes of
  one training sample's inputs from the first batch (recorded as the fingerprint's
  ``input_bytes_per_sample``, the size the performance model copies to the device).
- :meth:`~FrameworkRunner.loader_batch_s` (optional) reads the training DataLoader's CPU
  seconds per batch after the timed steps (the fingerprint's ``LOADER_KEY``).
- :meth:`~FrameworkRunner.gradient_noise` (optional, issue #19) measures the gradient noise
  scale on a few more training batches when ``request.gradient_noise``; the base calls it
  after the timed iterations and validation passes, so it does not change their timing.

The optional measurements (the gradient noise scale, the FLOP count, the warnings) never fail
a probe whose training steps ran (issue #26): an exception in one leaves it unmeasured (None)
and the probe's ``warnings`` say which measurement was skipped and why.

A hook signals a diverged loss by raising :class:`LossDiverged`. Failures are classified by
exception type (:meth:`FrameworkRunner.classify`) and come back as a failed
:class:`~advisor.probes.result.ProbeResult`; they are never raised.

Size: one concept, the probe loop every framework shares: the hooks' contract, the time box,
the order of the measurements and the result assembled from them; split, the contract would be
read in one module and kept in another.
"""

from __future__ import annotations

import itertools
import statistics
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from advisor.probes.gradient_noise import NoiseScale
from advisor.probes.host import busy_cpu_s, cores, others_cores, peak_rss_bytes, running_share
from advisor.probes.result import (
    LOADER_KEY,
    MIN_PROBE_ITERATIONS,
    ProbeRequest,
    ProbeResult,
    ProbeStatus,
    one_line,
)

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)


class LossDiverged(RuntimeError):
    """The training loss became NaN or infinite."""


@dataclass
class Prepared:
    """A workload built for a probe: the framework's ``state`` and what the result needs.

    ``n_train``/``n_val`` are the sizes to extrapolate to (``n_val`` 0 without validation).
    ``prepare_s`` is the data preparation time that grows with the data, for
    ``data_samples`` samples (None: unknown, not scaled); ``prepare_detail`` says what it is.
    """

    state: Any
    n_train: int
    n_val: int
    data_s: float | None = None
    data_samples: int = 0
    prepare_s: float | None = None
    prepare_detail: str = ""
    generated_train_samples: int | None = None


@dataclass(frozen=True)
class Timed:
    """The training steps a probe timed.

    ``iteration_s`` per iteration in order; ``step_ends`` (``time.perf_counter``) and
    ``step_cpu`` (``time.process_time``) at each step's end; ``first_batch_wall``
    (``time.time``) when the first batch was ready, where initialisation ends;
    ``first_batch_cpu`` the process's CPU clock (``time.process_time``) then (None: not read).
    """

    iteration_s: tuple[float, ...]
    step_ends: Sequence[float]
    step_cpu: Sequence[float]
    first_batch_wall: float
    first_batch_cpu: float | None = None


# A prior: past this share of its time-out, a probe leaves the DataLoader's reading (an untimed
# extra) to the advisor's own process, so that the reading cannot cost it the steps it timed
LOADER_TIME_SHARE = 0.5
RUNNING_NOTE = "the process's CPU time over its wall time (waiting for a busy core not counted)"
STEADY_SAMPLES = 3  # steady steps that must agree before a time-boxed probe may stop early
STEADY_SPREAD = 0.05  # ... within this share of the fastest of them


class TimeBox:
    """Counts the timed steps, reports progress and applies the probe's time box.

    :meth:`start` when the first batch is ready; :meth:`after_step` after every step returns
    True once the request's ``max_seconds`` have passed and ``MIN_PROBE_ITERATIONS`` ran.
    """

    def __init__(self, request: ProbeRequest, total: int, on_progress: ProgressFn | None) -> None:
        self.request = request
        self.total = total
        self._on_progress = on_progress
        self._start: float | None = None
        self._ends: list[float] = []
        self.done = 0

    def start(self) -> None:
        if self._start is None:
            self._start = time.perf_counter()

    def after_step(self) -> bool:
        """Record one finished step; whether the probe should stop now."""
        self.start()
        self.done += 1
        self._ends.append(time.perf_counter())
        if self._on_progress is not None:
            self._on_progress("iterations", self.done, self.total)
        assert self._start is not None
        return (
            self.done >= self.total
            or self.request.stop_early(self.done, time.perf_counter() - self._start)
            or self._steady()
        )

    def _steady(self) -> bool:
        """Issue #28: a time-boxed probe stops once its last ``STEADY_SAMPLES`` steady steps
        (the first step is warm-up) agree within ``STEADY_SPREAD``: more of the same would
        not change the steady time. A probe slowed by other processes varies more, so it
        keeps going to its iterations or time box. It never stops before
        ``MIN_PROBE_ITERATIONS``, the floor of every time-boxed probe."""
        if self.request.max_seconds is None or self.done < max(
            STEADY_SAMPLES + 1, MIN_PROBE_ITERATIONS
        ):
            return False
        last = self._ends[-(STEADY_SAMPLES + 1) :]  # the ends of the last steady steps
        steps = [b - a for a, b in itertools.pairwise(last)]
        low = min(steps)
        return low > 0 and max(steps) / low <= 1 + STEADY_SPREAD


class FrameworkRunner(ABC):
    """The probe of one framework: the loop lives here, the framework fills in the hooks."""

    name: ClassVar[str]
    init_measured: ClassVar[str] = "measured: process start to first batch ready"

    # --- hooks -------------------------------------------------------------------------------
    @abstractmethod
    def configure(self, request: ProbeRequest) -> int:
        """Set threads and device for this process; return the number of threads."""

    @abstractmethod
    def prepare(self, request: ProbeRequest) -> Prepared:
        """Build the workload (model, optimizer, the data the probe uses)."""

    @abstractmethod
    def run_iterations(self, prepared: Prepared, request: ProbeRequest, box: TimeBox) -> Timed:
        """Run and time the training steps, stopping when ``box.after_step()`` says so."""

    @abstractmethod
    def validation_pass(self, prepared: Prepared, request: ProbeRequest) -> tuple[float, int]:
        """One validation pass: (seconds, samples run)."""

    @abstractmethod
    def flops(self, prepared: Prepared, request: ProbeRequest) -> tuple[float | None, str]:
        """FLOPs of one training iteration (None: not counted) and how they were counted."""

    @abstractmethod
    def model_size(self, prepared: Prepared) -> tuple[int, int]:
        """(trainable parameters, gradient bytes)."""

    @abstractmethod
    def fingerprint(self, threads: int, device: str) -> dict[str, Any]:
        """Software and hardware facts recorded with the probe."""

    def is_oom(self, exc: BaseException) -> bool:
        """Whether ``exc`` is an out-of-memory error (by type; frameworks add theirs)."""
        return isinstance(exc, MemoryError)

    def peak_accelerator_memory(self, prepared: Prepared) -> int | None:
        return None

    def warnings(self, prepared: Prepared) -> tuple[str, ...]:
        return ()

    def input_bytes_per_sample(self, prepared: Prepared, request: ProbeRequest) -> float | None:
        """Issue #27: bytes of one sample's inputs, measured on the first training batch (the
        inputs, not the targets); None: not measured (the default)."""
        return None

    def loader_batch_s(self, prepared: Prepared, request: ProbeRequest) -> float | None:
        """The training DataLoader's CPU seconds per batch, read after the timed steps from
        the data the probe built (recorded as the fingerprint's ``LOADER_KEY``, so a GPU row
        does not build the data again to time it); None: not measured (the default)."""
        return None

    def gradient_noise(self, prepared: Prepared, request: ProbeRequest) -> NoiseScale | None:
        """Issue #19: the gradient noise scale ``B_simple`` on a few more training batches at
        the probe's weights (no optimizer step), time-boxed by ``request.max_seconds``;
        None: not measured (the default for a framework without it)."""
        return None

    # --- the probe ---------------------------------------------------------------------------
    def classify(self, exc: BaseException) -> ProbeStatus:
        """A failure's status by its exception type (:func:`classify`, with :meth:`is_oom`)."""
        return classify(exc, self.is_oom)

    def probe_in_process(
        self, request: ProbeRequest, on_progress: ProgressFn | None = None
    ) -> ProbeResult:
        """Time ``request.iterations`` training iterations and two validation passes, here.

        Failures (out of memory, NaN loss, timeout, any error in the workload) come back as a
        result with ``status`` oom/nan/timeout/error and a one-line reason; they are not raised.
        """
        started = request.process_start if request.process_start is not None else time.time()
        threads = request.threads
        try:
            threads = self.configure(request)
            return self._probe(request, threads, started, on_progress)
        except Exception as exc:  # reported, not raised: the caller compares many candidates
            return self.failure(request, exc, started, threads)

    def failure(
        self, request: ProbeRequest, exc: BaseException, started: float, threads: int | None
    ) -> ProbeResult:
        """The failed result for ``exc``, classified by :meth:`classify`."""
        try:
            fingerprint = self.fingerprint(threads or 1, "cpu")
        except Exception:  # the fingerprint is best effort on a failure
            fingerprint = {"framework": self.name}
        return ProbeResult.failure(
            request,
            self.classify(exc),
            one_line(f"{type(exc).__name__}: {exc}"),
            time.time() - started,
            framework=self.name,
            threads=threads,
            peak_host_memory_bytes=peak_rss_bytes(),
            fingerprint=fingerprint,
        )

    def _probe(
        self,
        request: ProbeRequest,
        threads: int,
        started: float,
        on_progress: ProgressFn | None,
    ) -> ProbeResult:
        prepared = self.prepare(request)
        box = TimeBox(request, request.iterations, on_progress)
        busy, cpu, wall = busy_cpu_s(), time.process_time(), time.perf_counter()
        timed = self.run_iterations(prepared, request, box)
        # issue #28: how busy the rest of the machine was while the steps were timed
        others = others_cores(
            busy, busy_cpu_s(), time.process_time() - cpu, time.perf_counter() - wall
        )
        if len(timed.iteration_s) < 2:
            raise ValueError(f"the probe timed {len(timed.iteration_s)} iterations, not >= 2")

        passes: list[float] = []
        measured_val = 0
        if prepared.n_val > 0:
            for p in range(2):
                seconds, measured_val = self.validation_pass(prepared, request)
                passes.append(seconds)
                if on_progress is not None:
                    on_progress("validation", p + 1, 2)
        scale = prepared.n_val / measured_val if measured_val else 1.0
        validation: tuple[float, ...] = ()
        if len(passes) == 2:
            v1, v2 = passes
            # The first pass's extra cost (warm-up, tracing) is paid once, not per batch.
            validation = (max(v1 - v2, 0.0) + v2 * scale, v2 * scale)
        skipped: list[str] = []  # optional measurements that failed (issue #26)
        # issue #19: after the timed iterations and validation passes (untimed; in wall_s)
        noise = None
        if request.gradient_noise:
            noise = optional(
                "gradient noise scale", skipped, self.gradient_noise, prepared, request
            )

        loader_s = None  # read only while the probe has time: else the advisor's process does
        if time.time() - started < LOADER_TIME_SHARE * request.timeout_s:
            loader_s = optional("DataLoader time", skipped, self.loader_batch_s, prepared, request)

        init_wall = timed.first_batch_wall - started
        init_s, init_note = self._init(prepared, init_wall)
        # issue #36: what the process waited for a busy core is not initialisation
        share = running_share(request.process_cpu_start, timed.first_batch_cpu, init_wall)
        data_s = prepared.data_s
        if share is not None and share < 1:
            init_s, init_note = init_s * share, f"{init_note}; x{share:.2f}: {RUNNING_NOTE}"
            # its data preparation is a part of it, on the same clock: scaled alike (rescaling
            # it to another dataset size would otherwise take more than init holds)
            data_s = None if data_s is None else data_s * share
        counted = optional("FLOP count", skipped, self.flops, prepared, request)
        flops, flops_note = counted if counted is not None else (None, "not counted")
        warnings = optional("warnings", skipped, self.warnings, prepared) or ()
        params, grad_bytes = self.model_size(prepared)
        median = statistics.median(timed.iteration_s[1:])
        in_bytes = optional("input size", skipped, self.input_bytes_per_sample, prepared, request)
        fingerprint = self.fingerprint(threads, request.device)
        fingerprint.update(
            flops_method=flops_note,
            init_note=init_note,
            generated_train_samples=prepared.generated_train_samples,
        )
        if share is not None:  # issue #36: the initialisation's wall time and running share
            fingerprint["init_clocks"] = {"wall_s": round(init_wall, 4), "running": round(share, 4)}
        if others is not None:  # measured: other processes' busy cores over the timed steps
            fingerprint["contention"] = {"others_cores": round(others, 3), "cores": cores()}
        if loader_s is not None:  # untimed, after the steps: the input pipeline's host term
            fingerprint[LOADER_KEY] = float(loader_s)
        if in_bytes is not None:  # issue #27: measured, not assumed from a shape
            fingerprint["input_bytes_per_sample"] = float(in_bytes)
        return ProbeResult(
            workload=request.workload,
            framework=self.name,
            batch_size=request.batch_size,
            device=request.device,
            threads=threads,
            init_s=init_s,
            iteration_s=timed.iteration_s,
            validation_s=validation,
            validation_samples_measured=measured_val,
            validation_scale=scale,
            n_train=prepared.n_train,
            n_val=prepared.n_val,
            flops_per_iteration=flops,
            parameters=params,
            gradient_bytes=grad_bytes,
            peak_host_memory_bytes=peak_rss_bytes(),
            peak_accelerator_memory_bytes=self.peak_accelerator_memory(prepared),
            samples_per_s=request.batch_size / median if median > 0 else None,
            cpu_utilisation=cpu_utilisation(timed, threads),
            wall_s=time.time() - started,
            fingerprint=fingerprint,
            data_s=data_s,
            data_samples=prepared.data_samples,
            warnings=(*warnings, *skipped),
            gradient_noise=noise.to_dict() if noise is not None else None,  # issue #19
        )

    def _init(self, prepared: Prepared, measured_s: float) -> tuple[float, str]:
        """Initialisation: measured, plus data preparation scaled to the full dataset."""
        total = prepared.n_train + prepared.n_val
        done = prepared.data_samples
        if prepared.prepare_s is None or not done or total <= done:
            return measured_s, self.init_measured
        extra = prepared.prepare_s * (total / done - 1.0)
        return measured_s + extra, (
            f"measured, plus data preparation ({prepared.prepare_detail}) scaled from {done} "
            f"generated samples to {total} (+{extra:.3f} s)"
        )


def classify(
    exc: BaseException, is_oom: Callable[[BaseException], bool] | None = None
) -> ProbeStatus:
    """A failure's status by its exception type: :class:`LossDiverged` is nan; an
    out-of-memory error (``is_oom``; at least :class:`MemoryError`) is oom;
    :class:`TimeoutError` is timeout; anything else is error."""
    if isinstance(exc, LossDiverged):
        return "nan"
    if isinstance(exc, MemoryError) or (is_oom is not None and is_oom(exc)):
        return "oom"
    if isinstance(exc, TimeoutError):
        return "timeout"
    return "error"


def optional(what: str, skipped: list[str], hook: Callable[..., Any], *args: Any) -> Any:
    """``hook(*args)``, or None when it raises: an optional measurement never fails a probe.
    Out-of-memory and other errors alike are caught; a line saying which measurement was not
    taken and why is appended to ``skipped`` (the probe's warnings)."""
    try:
        return hook(*args)
    except Exception as exc:  # recorded, not raised: the timed steps already ran
        skipped.append(one_line(f"{what} not measured: {type(exc).__name__}: {exc}", 300))
        return None


def cpu_utilisation(timed: Timed, threads: int) -> float | None:
    """Mean busy fraction of ``threads`` cores from the first step's end to the last's."""
    if len(timed.step_ends) < 2 or len(timed.step_cpu) < 2:
        return None
    span = timed.step_ends[-1] - timed.step_ends[0]
    if span <= 0:
        return None
    return min(1.0, (timed.step_cpu[-1] - timed.step_cpu[0]) / (span * threads))
