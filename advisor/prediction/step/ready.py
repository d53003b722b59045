"""A probe made ready for prediction: its operator trace and its loader time, taken once.

``traced(probe)`` adds what the performance model reads besides the probe's timings, when
the probe lacks it:

- the operator trace of one training step at the probe's batch size
  (``advisor.probes.operators.trace_workload``: on the meta device, or a real CPU step when
  that fails; from the layers for Keras), kept in ``ProbeResult.operator_trace`` so that the
  probe cache stores it with the probe and it is never recomputed;
- for PyTorch, the DataLoader's CPU seconds per batch (``fingerprint["data_s"]``: the input
  pipeline's host term), when the probe did not read it itself: measured here
  (``step.loader``), building the data again;
- the runtime hyperparameters it was traced with (``step.traces.HYPERPARAMETERS_KEY``), so a
  later trace at another per-device batch builds the same model.

Everything the probe already carries is kept (its ``input_bytes_per_sample`` included). A
measurement that cannot be taken is left out and said in the notes returned; it never fails.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from advisor.prediction.memo import Memo
from advisor.prediction.step.traces import (
    HYPERPARAMETERS_KEY,
    remember,
    remembered,
    trace_key,
    user_modules_importable,
)
from advisor.probes.operators.stored import operator_trace_of, with_operator_trace
from advisor.probes.operators.types import OperatorTrace
from advisor.probes.result import LOADER_KEY, ProbeResult

UNTIMED_KEY = "untimed"  # fingerprint key: why the model was traced without a local timing


def is_untimed(probe: ProbeResult) -> bool:
    """Whether ``probe`` is a stand-in for a model traced without a local timing."""
    return bool(probe.fingerprint.get(UNTIMED_KEY))


def needs_trace(probe: ProbeResult) -> bool:
    """Whether ``traced`` would add anything to ``probe``."""
    if not probe.ok:
        return False
    loader = probe.framework == "torch" and LOADER_KEY not in probe.fingerprint
    return probe.operator_trace is None or loader


def traced(
    probe: ProbeResult,
    hyperparameters: dict[str, Any] | None = None,
    trace: OperatorTrace | None = None,
    meta_only: bool = False,
) -> tuple[ProbeResult, tuple[str, ...]]:
    """``probe`` with its operator trace and loader time (each taken only when missing), and
    notes on what could not be taken. ``trace``: one already taken (the model traced before
    deciding not to time it locally); ``meta_only``: never run a real step or build the model
    for real (a model too big or too slow for this machine)."""
    if not needs_trace(probe):
        return probe, ()

    # Issue #34: a model traced without a local timing is too big for this machine: never
    # build it for real (its DataLoader is timed with the model on the meta device).
    meta_only = meta_only or is_untimed(probe)
    hps = dict(hyperparameters or {})
    notes: list[str] = []
    fingerprint = dict(probe.fingerprint)
    if hps:
        fingerprint[HYPERPARAMETERS_KEY] = hps
    out = dataclasses.replace(probe, fingerprint=fingerprint)
    if operator_trace_of(out) is None:
        try:
            trace = trace or _trace(probe, hps, meta_only)
            out = with_operator_trace(out, trace)
        except Exception as exc:  # GPUs then fall back on a FLOP roofline, said in their note
            notes.append(f"could not trace the training step ({_one_line(exc)})")
    if out.framework == "torch" and LOADER_KEY not in out.fingerprint:
        try:
            timing = _loader(out.workload, out.batch_size, hps, meta_only)
        except Exception as exc:
            timing = None
            notes.append(f"could not time the DataLoader ({_one_line(exc)}); input prior")
        if timing is not None and timing.data_s is not None:
            fp = {**out.fingerprint, LOADER_KEY: timing.data_s}
            if timing.input_bytes_per_sample is not None:
                fp.setdefault("input_bytes_per_sample", timing.input_bytes_per_sample)
            out = dataclasses.replace(out, fingerprint=fp)
        elif timing is not None:
            notes.append(f"the DataLoader was not timed ({timing.note}); input prior")
    return out, tuple(notes)


def _trace(probe: ProbeResult, hps: dict[str, Any], meta_only: bool) -> OperatorTrace:
    """The step at the probe's batch: this process's earlier trace of it, else traced now."""
    from advisor.probes.operators.workload import trace_workload

    key = trace_key(probe.workload, probe.framework, probe.batch_size, hps)
    found = remembered(key)
    if found is None:
        mode = "meta" if meta_only and probe.framework == "torch" else "auto"
        with user_modules_importable():
            found = trace_workload(
                probe.workload, probe.batch_size, probe.framework, hps, mode=mode
            )
        remember(key, found)
    return found


_LOADERS: Memo[Any] = Memo("DataLoader timings", bound=256)


def _loader(workload: str, batch: int, hps: dict[str, Any], meta_only: bool) -> Any:
    """The DataLoader timed once per workload, batch and hyperparameters in this process."""
    import json

    from advisor.prediction.step.loader import time_loader

    key = (workload, batch, json.dumps(hps, sort_keys=True), meta_only)

    def timed() -> Any:
        with user_modules_importable():
            return time_loader(workload, batch, hps, model_on_meta=meta_only)

    return _LOADERS.get_or_make(key, timed)


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
