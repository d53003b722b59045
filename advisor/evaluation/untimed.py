"""A model too big or too slow to time here: traced without running it (issue #26).

Before a local probe runs, ``decide`` traces the training step on the meta device (shapes
only: no compute, no memory) and asks ``local_feasibility`` whether a probe fits this machine:
the step's memory against the memory available now, its FLOPs against this CPU's measured
matrix-product rate (both lower bounds, so "infeasible" is safe to act on). An infeasible
model gets no local timing; ``untimed_probe`` stands in for the probe it would have given:

- its operator trace (what every GPU and TPU prediction reads; the CPU timing never does);
- the DataLoader's time, measured here with the model built on the meta device (a measured
  stand-in for the probe's loader; None where the builder makes its data on the meta device
  too, then the input prior), and the bytes of one sample's inputs from that batch; above
  ``LOADER_MAX_BATCH`` timed at that batch and scaled per sample (issue #34: the data of a
  huge batch would not fit either);
- the host's initialisation: a prior (``timing.constants.UNTIMED_INIT_S``, x/3);
- a CPU step for CPU targets: the trace's FLOPs at this CPU's measured product rate, a
  measured stand-in and a lower bound (x/3);
- ``fingerprint["untimed"]``: why, which every prediction and note repeats.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from advisor.errors import AdvisorError
from advisor.probes.result import ProbeResult
from advisor.search_spaces.workloads import ModelRef

# Issue #34: the largest batch whose DataLoader a stand-in times (a built-in workload makes
# batch x 5 samples for it); a larger batch's time is scaled per sample from it.
LOADER_MAX_BATCH = 256


@dataclass(frozen=True)
class LocalDecision:
    """The step's trace, taken before any probe, and whether a local probe can run here."""

    trace: Any  # OperatorTrace
    feasible: bool
    reason: str


def decide(
    model: str,
    batch_size: int,
    framework: str = "torch",
    hyperparameters: dict[str, Any] | None = None,
    max_step_s: float | None = None,
) -> LocalDecision | None:
    """Trace ``model`` on the meta device and judge a local probe (None: it cannot be traced
    here, so the probe runs as before). ``max_step_s``: the step's lower bound beyond which
    it is not timed here (default ``local_feasibility``'s, what ``advisor predict`` uses).
    The trace is kept in this process's memo (``step.traces``, the key the GPU rows' traces
    use): the first answer and the run's own screen trace each batch size once (issue #36)."""
    from advisor.prediction.step.traces import (
        remember,
        remembered,
        trace_key,
        user_modules_importable,
    )
    from advisor.probes.isolated import UserCodeError
    from advisor.probes.operators import local_feasibility, trace_workload

    mode = "meta" if framework == "torch" else "auto"
    key = trace_key(model, framework, batch_size, dict(hyperparameters or {}))
    trace = remembered(key)
    if trace is None:
        try:
            with user_modules_importable():
                trace = trace_workload(model, batch_size, framework, hyperparameters, mode=mode)
        except UserCodeError:  # issue #50: it exited, crashed or hung: a probe would too
            raise
        except Exception:  # the probe runs and its own trace is taken after (step.ready)
            return None
        remember(key, trace)
    if ModelRef(model).is_hf:  # issue #48: the GPU rows read the trace, never a CPU timing
        return LocalDecision(trace, False, "an open language model, fine-tuned on GPUs")
    if not trace.memory_bytes:
        return LocalDecision(trace, True, "no memory figure in the trace")
    limit = {} if max_step_s is None else {"max_step_s": max_step_s}
    verdict = local_feasibility(trace, memory_bytes=host_memory_bytes(trace), **limit)
    return LocalDecision(trace, verdict.feasible, verdict.reason)


def host_memory_bytes(trace: Any) -> float | None:
    """Issue #34: what a probe of the step holds in this machine's RAM, from the one memory
    model (the GPU rows read the same model, with the GPU's fixed cost): the step's tensors,
    the process and its heap's holes (stop 65: ``on_host``, measured, their central
    values); None when the model cannot say."""
    from advisor.prediction.memory.model import on_host, step_memory

    memory = on_host(step_memory(trace, device="cpu"))
    return memory.bytes if memory.known else None


def untimed_probe(
    model: str,
    batch_size: int,
    decision: LocalDecision,
    framework: str = "torch",
    hyperparameters: dict[str, Any] | None = None,
    n_train: int | None = None,
    n_val: int | None = None,
    loader: Any = None,
) -> ProbeResult:
    """The stand-in probe of a model traced without a local timing (see the module);
    ``loader`` (a ``LoaderTiming``) is used instead of timing the DataLoader here (issue #36:
    the first answer scales one batch size's)."""
    from advisor.prediction.step.ready import UNTIMED_KEY
    from advisor.prediction.timing import constants as C
    from advisor.probes.operators import local_feasibility, with_operator_trace

    trace = decision.trace
    user = ModelRef(model).is_user
    fingerprint: dict[str, Any] = {UNTIMED_KEY: decision.reason}
    warnings = []
    sizes = (None, None) if user else _builtin_sizes(model)
    if framework == "torch":
        from advisor.evaluation.user_code import run_model_code
        from advisor.prediction.step.loader import time_loader
        from advisor.prediction.step.traces import user_modules_importable
        from advisor.probes.isolated import UserCodeError

        timed = min(batch_size, LOADER_MAX_BATCH)  # issue #34: its data stay small too
        try:
            timing = loader  # issue #36: given for this batch size (scaled by the caller)
            if timing is None:
                with user_modules_importable():
                    timing = run_model_code(
                        model, f"its DataLoader timed at batch {timed}", time_loader,
                        model, timed, hyperparameters, model_on_meta=True, own_sizes=user,
                    )  # fmt: skip
            else:
                timed = batch_size
        except UserCodeError:  # issue #50: an exit, a crash, a hang: not an input prior
            raise
        except Exception as exc:
            warnings.append(f"DataLoader not timed ({type(exc).__name__}: {exc}); input prior")
        else:
            if user:
                sizes = (timing.n_train, timing.n_val)
            if timing.data_s is not None:  # measured here, model on meta, per sample
                fingerprint["data_s"] = timing.data_s * batch_size / timed
                if timed < batch_size:
                    fingerprint["data_s_basis"] = f"timed at batch {timed}, scaled per sample"
            if timing.input_bytes_per_sample is not None:
                fingerprint["input_bytes_per_sample"] = timing.input_bytes_per_sample
    if user and not n_train and not sizes[0]:  # issue #36: KerasSetup's declared sizes, or
        # len() of the datasets when the loader could not be timed
        from advisor.evaluation.user_sizes import builder_sizes

        found = builder_sizes(model, framework, batch_size)
        sizes = (found.n_train, found.n_val)
    n_train = n_train or sizes[0] or 0
    n_val = n_val if n_val is not None else (sizes[1] or 0)
    if n_train <= 0:
        raise AdvisorError(
            f"--model {model} is traced without a local timing and its dataset size is unknown.",
            "pass --n-train N (and --n-val N).",
        )
    verdict = local_feasibility(trace, memory_bytes=host_memory_bytes(trace))
    step = max(verdict.estimated_step_s, 1e-9)
    forward = sum(o.flops * o.count for o in trace.operators if o.phase == "forward")
    share = forward / trace.flops if trace.flops > 0 else 1 / 3
    val = math.ceil(n_val / batch_size) * step * share if n_val else 0.0
    probe = ProbeResult(
        workload=model,
        framework=framework,
        batch_size=batch_size,
        device="cpu",
        threads=default_threads(),
        init_s=C.UNTIMED_INIT_S,
        iteration_s=(step, step, step),
        validation_s=(val, val) if n_val else (),
        n_train=n_train,
        n_val=n_val,
        flops_per_iteration=trace.flops,
        parameters=trace.parameters,
        gradient_bytes=4 * trace.parameters,
        fingerprint=fingerprint,
        warnings=tuple(warnings),
    )
    return with_operator_trace(probe, trace)


def _builtin_sizes(model: str) -> tuple[int | None, int | None]:
    from advisor.search_spaces.workloads import get

    wl = get(model)
    return wl.n_train, wl.n_val


def default_threads() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def untimed_note(probe: ProbeResult) -> str | None:
    """What a prediction from a stand-in probe must say (None for a timed probe)."""
    from advisor.prediction.step.ready import UNTIMED_KEY

    why = probe.fingerprint.get(UNTIMED_KEY)
    if not why:
        return None
    basis = probe.fingerprint.get("data_s_basis")
    loader = (
        "the DataLoader timed here with the model on the meta device (a measured stand-in"
        + (f"; {basis})" if basis else ")")
        if "data_s" in probe.fingerprint
        else "the input pipeline a prior"
    )
    from advisor.prediction.timing import constants as C

    return (
        f"Traced without a local timing ({why}). GPU and TPU rows read the operator trace "
        f"only; {loader}; the host initialisation a prior ({C.UNTIMED_INIT_S:g} s "
        f"x/{C.UNTIMED_INIT_FACTOR:g}); CPU rows scale a stand-in step (the trace's FLOPs at "
        f"this CPU's measured product rate, a lower bound, x/{C.UNTIMED_CPU_FACTOR:g})."
    )
