"""The notes under a prediction (``advisor predict``, ``advisor.predict``): what is only
predicted, how each device time was obtained, which rows do not fit their devices' memory or
whose memory is unknown, and which machines were left out before predicting (issue #50: more
GPUs than samples in the batch)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError
from advisor.search_spaces.workloads import ModelRef

if TYPE_CHECKING:
    from advisor.prediction.forecast.forecast import Forecast
    from advisor.probes.result import ProbeResult
    from advisor.providers.catalog import InstanceType


def prediction_notes(
    model: str,
    probe: ProbeResult,
    machines: Sequence[InstanceType],
    rows: Sequence[Forecast] = (),
) -> list[str]:
    """What the rows cannot say themselves: how the accelerator rows were obtained and which
    operators dominate them, and that the model was traced without a local timing (issue #26);
    TPU rows are predicted only, which types are previous generation or retired, and a user
    model's unmeasured input size (issue #27)."""
    from advisor.evaluation.candidates import predicted_only
    from advisor.evaluation.untimed import untimed_note

    notes = [*memory_notes(rows), *how_obtained(rows)]
    untimed = untimed_note(probe)
    if untimed:
        notes.append(untimed)
    tpus = [m.key for m in machines if predicted_only(m)]
    if tpus:
        notes.append(
            f"Predicted only: {', '.join(tpus)} -- advisor cannot train or probe on TPUs (no "
            "PyTorch/XLA in its image), so advisor suggest never recommends them; the TPU "
            "step is fitted on one published run (benchmarks/tpu_results.py)."
        )
    old = [f"{m.key} ({m.lifecycle})" for m in machines if not m.current]
    if old:
        notes.append(
            f"Not current: {', '.join(old)}; advisor suggest leaves such types out unless "
            "--include-previous-generation."
        )
    if ModelRef(model).is_user and "input_bytes_per_sample" not in probe.fingerprint:
        notes.append(
            "Input size unknown: this probe of your model did not measure its input bytes per "
            "sample, so the host-to-device copy counts 0 bytes (probe again to measure it)."
        )
    return notes


def fewer_gpus_than(machines: Sequence[Any], batch_size: int) -> tuple[list[Any], list[str]]:
    """The machines with at most ``batch_size`` GPUs, and a note on the others (issue #50:
    ``-b 1`` ranked 8-GPU machines at one sample per GPU, a global batch of 8, and charged 8
    GPUs); an error when none is left."""
    kept = [m for m in machines if m.accelerator_count <= batch_size]
    out = [m.key for m in machines if m.accelerator_count > batch_size]
    if not out:
        return kept, []
    if not kept:
        raise AdvisorError(
            f"Batch {batch_size} gives each GPU of {', '.join(out)} less than one sample.",
            f"use a batch of at least {min(m.accelerator_count for m in machines)}, or "
            "machines with fewer GPUs.",
        )
    return kept, [
        f"Left out: {', '.join(out)}: batch {batch_size} gives each of their GPUs less than "
        "one sample (data parallel splits the batch across the GPUs)."
    ]


def memory_notes(rows: Sequence[Forecast]) -> list[str]:
    """Issue #34: how many rows do not fit their devices' memory, with their figures, and
    which rows' memory is unknown."""
    from advisor.prediction.memory.device import REPLICA_NOTE

    gpu = [f for f in rows if f.memory is not None]
    out = [f for f in gpu if not f.fits and not f.memory_unknown]
    unknown = [f.machine.key for f in gpu if f.memory is not None and f.memory.fits is None]
    notes = []
    if out:
        many = "none" if len(out) == len(rows) else f"{len(out)}"
        figures = "; ".join(
            f"{f.machine.key} at batch {f.memory.per_device_batch} per device "
            + f.memory.text().removeprefix("does not fit: ")
            for f in out
            if f.memory is not None
        )
        notes.append(
            f"Does not fit: none of the {len(rows)} machine(s) can hold a step in its memory "
            f"({figures}). They are left out of fastest, cheapest and the tables, and "
            "advisor suggest never recommends, runs or charges them. What needs less memory "
            "per GPU: a plan (--plan sharding=parameters on a machine with several GPUs, "
            "accumulation=8, checkpointing=blocks), more GPUs, or a smaller batch; `advisor "
            "suggest` searches the plans itself."
            if many == "none"
            else f"Does not fit: {many} of {len(rows)} machine(s) cannot hold a step in their "
            f"memory ({figures}). They are left out of fastest, cheapest and the tables, "
            "and advisor suggest never recommends, runs or charges them."
        )
    if gpu:
        notes.append(
            "Memory per device: the step's predicted peak (up to its upper estimate) against "
            "one GPU's usable memory (a CPU machine's: its RAM, which also holds the process "
            "and its heap's holes, measured); a row fits only when its "
            f"upper estimate does ({REPLICA_NOTE}; the plan's step traced as advisor.train "
            "runs it; the GPU's fixed cost is a prior; docs/memory-model.md)."
        )
    if unknown:
        notes.append(
            f"Memory unknown for {', '.join(unknown)}: the step could not be traced, so whether "
            "it fits is not known: shown, never named fastest or cheapest, never recommended."
        )
    return notes


def how_obtained(rows: Sequence[Forecast]) -> list[str]:
    """Issue #26: how the accelerator rows' device times were obtained (the kernel model fitted
    on which GPUs; for each GPU, measured, its chip measured on another board, or extrapolated
    from its spec sheet; a TPU's roofline) and which operators dominate each."""
    from advisor.prediction.timing.phases import dominant_labels

    kinds: dict[str, list[str]] = {}
    dominant: list[str] = []
    fitted = ""
    for f in rows:
        pred, name = f.prediction, f.machine.accelerator
        if not name or not pred.basis or any(name in v for v in kinds.values()):
            continue
        basis = pred.basis
        if basis.startswith("kernel model fitted on "):
            fitted = basis.removeprefix("kernel model fitted on ").split(";")[0]
        how = (
            "spec extrapolation" if "spec extrapolation" in basis
            else "its chip measured on another board" if "its chip measured" in basis
            else "measured" if basis.endswith(" measured")
            else basis.split(":")[0]
        )  # fmt: skip
        kinds.setdefault(how, []).append(name)
        top = dominant_labels(pred.top_operators)
        if top:
            dominant.append(f"{name}: {top}")
    if not kinds:
        return []
    parts = [f"{how} for {', '.join(names)}" for how, names in kinds.items()]
    head = f"kernel model fitted on {fitted}; " if fitted else ""
    lines = [f"Device times: {head}{'; '.join(parts)} (docs/kernel-model.md)."]
    if dominant:
        lines.append(f"Dominated by (share of device time): {'; '.join(dominant)}.")
    return lines
