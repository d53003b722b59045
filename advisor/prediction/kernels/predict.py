"""Predict operators and whole traces on GPUs: the kernel model's public entry points.

``predict_operator(op, gpu)`` gives one kernel's device seconds; ``predict_trace(trace, gpus)``
gives a training step's device time per GPU with its forward/backward/optimizer split and the
operators that dominate. Both are vectorised: the distinct operators of the trace times the
distinct GPUs go through each family's trees once (a 1,000-operator trace on a hundred
machines takes well under a second: ``benchmarks/kernel_model.py``).

Times are device times of the kernels (plus a launch prior each), not host dispatch: the
eager host cost per operator and the input pipeline are separate terms of the product.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from advisor.intervals import Interval
from advisor.prediction.kernels.gpus import GpuSpec, chip_name, gpu_spec, measured_name
from advisor.prediction.kernels.model import KernelModel, load_model
from advisor.prediction.kernels.ops import WIDEN, Placed, notes_for, place
from advisor.prediction.memo import Memo
from advisor.probes.operators.types import PHASES, Operator, OperatorTrace

TOP = 8


@dataclass(frozen=True)
class OperatorTimes:
    """Per-operator (rows) and per-GPU (columns) device seconds with 80 % intervals."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    measured: np.ndarray  # the GPU had measurements of the operator's family
    same_chip: np.ndarray  # its chip had them, on another board
    tensor_cores: np.ndarray  # the kernel runs at a tensor-core peak on that GPU (a prior)
    reasons: tuple[tuple[str, ...], ...]  # per operator, what it extrapolates (but tensor cores)


@dataclass(frozen=True)
class StepPrediction:
    """One GPU's predicted device time of a traced step (seconds)."""

    gpu: str
    total: Interval
    by_phase: dict[str, Interval]
    top: tuple[tuple[str, float, float], ...]  # (operator, seconds per step, share)
    basis: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "total": self.total.to_dict(),
            "by_phase": {k: v.to_dict() for k, v in self.by_phase.items()},
            "top": [{"operator": o, "seconds": s, "share": f} for o, s, f in self.top],
            "basis": self.basis,
            "notes": list(self.notes),
        }


def _peak(gpu: GpuSpec, precision: str) -> float:
    if precision == "fp32":
        return gpu.fp32_tflops * 1e12
    if precision == "tf32":
        return (gpu.tf32_tflops or gpu.fp32_tflops) * 1e12
    dtype = "bfloat16" if precision == "bf16" else "float16"
    return gpu.peak_tflops(dtype, tensor_cores=True) * 1e12


# One operator's times on one GPU, as ``operator_times`` computed them with the shipped
# model (value, low, high, measured, same chip, tensor cores, reasons), by (operator's key,
# FLOPs, bytes; the GPU's figures; tf32 flags). A screen prices the same kernels again and
# again: a plan's forward and the other plans' share them, and every row of a machine asks
# for its GPU's times once per step it prices (issue #46: the trees were half of a Llama
# LoRA screen's own CPU). 200,000 rows are about 60 MB.
_ROWS: Memo[tuple[Any, ...]] = Memo("kernel model operator rows", bound=200_000)


def operator_times(
    ops: Sequence[Operator],
    gpus: Sequence[GpuSpec],
    model: KernelModel | None = None,
    tf32_matmul: bool = False,
    tf32_conv: bool = True,
) -> OperatorTimes:
    """Device seconds of every operator (one call each) on every GPU, vectorised by family;
    with the shipped model, each (operator, GPU) is computed once per process (``_ROWS``)."""
    if (model is not None and model is not load_model()) or not ops or not gpus:
        return _operator_times(ops, gpus, model or load_model(), tf32_matmul, tf32_conv)
    keys = [(op.key, op.flops, op.bytes, tf32_matmul, tf32_conv) for op in ops]
    found = [[_ROWS.get((k, g)) for g in gpus] for k in keys]
    todo = [i for i, row in enumerate(found) if any(r is None for r in row)]
    if todo:
        fresh = _operator_times([ops[i] for i in todo], gpus, load_model(), tf32_matmul, tf32_conv)
        for n, i in enumerate(todo):
            for j, g in enumerate(gpus):
                row = (float(fresh.value[n, j]), float(fresh.low[n, j]),
                       float(fresh.high[n, j]), bool(fresh.measured[n, j]),
                       bool(fresh.same_chip[n, j]), bool(fresh.tensor_cores[n, j]),
                       fresh.reasons[n])  # fmt: skip
                found[i][j] = row
                _ROWS.put((keys[i], g), row)
    done = [[row for row in rows if row is not None] for rows in found]  # every GPU's now

    def column(k: int, dtype: Any = float) -> np.ndarray:
        return np.array([[row[k] for row in rows] for rows in done], dtype=dtype)

    return OperatorTimes(
        column(0), column(1), column(2), column(3, bool), column(4, bool), column(5, bool),
        tuple(rows[0][6] for rows in done),
    )  # fmt: skip


def _operator_times(
    ops: Sequence[Operator],
    gpus: Sequence[GpuSpec],
    model: KernelModel,
    tf32_matmul: bool,
    tf32_conv: bool,
) -> OperatorTimes:
    placed = [place(op, tf32_matmul, tf32_conv) for op in ops]
    shape = (len(ops), len(gpus))
    value, low, high = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    measured = np.zeros(shape, dtype=bool)
    same_chip = np.zeros(shape, dtype=bool)
    tensor = np.zeros(shape, dtype=bool)
    names = np.array([measured_name(g) for g in gpus])
    chips = np.array([chip_name(g) for g in gpus])
    bandwidth = np.array([g.memory_bandwidth_gbs * 1e9 for g in gpus])
    sms = np.array([float(g.sm_count) for g in gpus])
    for family in sorted({p.family for p in placed}):
        idx = [i for i, p in enumerate(placed) if p.family == family]
        fam: list[Placed] = [placed[i] for i in idx]
        rows = {k: np.repeat([p.cols[k] for p in fam], len(gpus)) for k in fam[0].cols}
        peak2 = np.array([[_peak(g, p.precision) for g in gpus] for p in fam])
        fp32 = np.array([g.fp32_tflops * 1e12 for g in gpus])
        on_tensor = peak2 != fp32[None, :]
        tensor[idx] = on_tensor
        peak = peak2.ravel()
        base = np.array([sum(WIDEN[r] for r in p.reasons if r != "tensor_cores") for p in fam])
        extra = (base[:, None] + WIDEN["tensor_cores"] * on_tensor).ravel()
        as_float32 = None  # products only: a memory-bound family's features have no peak
        if family in ("gemm", "conv"):  # the float32 kernel of each shape: its peak, its bytes
            shrink = np.array([2.0 if p.precision in ("bf16", "fp16") else 1.0 for p in fam])
            as_float32 = (np.tile(fp32, len(fam)), (bandwidth[None, :] / shrink[:, None]).ravel())
        times = model.device_times(
            family, rows, peak, np.tile(bandwidth, len(fam)), np.tile(sms, len(fam)),
            np.tile(names, len(fam)), extra, np.tile(chips, len(fam)), as_float32,
        )  # fmt: skip
        for arr, src in ((value, times.value), (low, times.low), (high, times.high)):
            arr[idx] = src.reshape(len(fam), len(gpus))
        measured[idx] = times.measured.reshape(len(fam), len(gpus))
        same_chip[idx] = times.same_chip.reshape(len(fam), len(gpus))
    reasons = tuple(tuple(r for r in p.reasons if r != "tensor_cores") for p in placed)
    return OperatorTimes(value, low, high, measured, same_chip, tensor, reasons)


def predict_operator(op: Operator, gpu: str | GpuSpec | Any, **options: bool) -> Interval:
    """Device seconds of one call of ``op`` on ``gpu`` (catalog name, device name or spec),
    with its 80 % interval. ``options``: ``tf32_matmul`` (default False), ``tf32_conv``
    (default True), PyTorch's defaults."""
    times = operator_times(
        [op],
        [gpu_spec(gpu)],
        tf32_matmul=options.get("tf32_matmul", False),
        tf32_conv=options.get("tf32_conv", True),
    )
    return Interval(float(times.value[0, 0]), float(times.low[0, 0]), float(times.high[0, 0]))


def label(op: Operator) -> str:
    """A short name of an operator for the top list: kind, op, shape, phase."""
    shape = "x".join(str(v) for v in op.dims.values())
    what = op.op or op.name.split(".")[-1]
    return f"{op.phase} {op.kind} {what} [{shape}] {op.dtype.replace('torch.', '')}"


def basis(gpu: GpuSpec, how: str, model: KernelModel) -> str:
    """How a GPU's prediction was obtained (``how``: measured, chip or spec), in one line."""
    fitted = ", ".join(model.fitted_gpus("gemm"))
    if how == "measured":
        return f"kernel model fitted on {fitted}; {gpu.name} measured"
    if how == "chip":
        return (f"kernel model fitted on {fitted}; {gpu.name}: its chip measured as "
                f"{chip_name(gpu)}, spec figures of its own board")  # fmt: skip
    return f"kernel model fitted on {fitted}; spec extrapolation for {gpu.name}"


def predict_trace(
    trace: OperatorTrace,
    gpus: Sequence[str | GpuSpec | Any],
    tf32_matmul: bool = False,
    tf32_conv: bool = True,
    model: KernelModel | None = None,
) -> dict[str, StepPrediction]:
    """Device time of one step of ``trace`` on each GPU (by GPU name), split by phase, with
    the top operators and the basis of the prediction. Errors are summed as if fully
    correlated (the interval of the step is the sum of the operators' lows and highs)."""
    return predict_trace_times(trace, gpus, tf32_matmul, tf32_conv, model)[0]


def predict_trace_times(
    trace: OperatorTrace,
    gpus: Sequence[str | GpuSpec | Any],
    tf32_matmul: bool = False,
    tf32_conv: bool = True,
    model: KernelModel | None = None,
) -> tuple[dict[str, StepPrediction], OperatorTimes]:
    """``predict_trace`` and the per-operator times it summed (rows: the trace's operators,
    columns: the distinct GPUs in order), for a caller that also groups them (issue #46: the
    step-time model had computed them twice)."""
    model = model or load_model()
    specs: dict[str, GpuSpec] = {}
    for g in gpus:
        spec = gpu_spec(g)
        specs.setdefault(spec.name, spec)
    ops = list(trace.operators)
    times = operator_times(ops, list(specs.values()), model, tf32_matmul, tf32_conv)
    counts = np.array([op.count for op in ops], dtype=float)
    phases = np.array([op.phase for op in ops])
    out = {}
    for j, (name, spec) in enumerate(specs.items()):
        per_step = counts * times.value[:, j]
        by_phase = {}
        for phase in PHASES:
            mask = phases == phase
            if mask.any():
                by_phase[phase] = Interval(
                    float(per_step[mask].sum()),
                    float((counts * times.low[:, j])[mask].sum()),
                    float((counts * times.high[:, j])[mask].sum()),
                )
        total = Interval(
            float(per_step.sum()),
            float((counts * times.low[:, j]).sum()),
            float((counts * times.high[:, j]).sum()),
        )
        order = np.argsort(-per_step)[:TOP]
        share = per_step / max(total.value, 1e-30)
        top = tuple((label(ops[i]), float(per_step[i]), float(share[i])) for i in order)
        how = "measured" if times.measured[:, j].any() else "spec"
        if how == "spec" and times.same_chip[:, j].any():
            how = "chip"
        reasons = {r for i in range(len(ops)) for r in times.reasons[i]}
        if times.tensor_cores[:, j].any():
            reasons.add("tensor_cores")
        notes = notes_for(reasons)
        if how == "spec":
            notes.insert(0, f"no kernel measurements on {name}: predicted from its spec sheet "
                            "(wider interval)")  # fmt: skip
        elif how == "chip":
            notes.insert(0, f"{name}: level of its chip measured on {chip_name(spec)}, its own "
                            "spec figures (spec-only interval)")  # fmt: skip
        out[name] = StepPrediction(name, total, by_phase, top, basis(spec, how, model),
                                   tuple(notes))  # fmt: skip
    return out, times
