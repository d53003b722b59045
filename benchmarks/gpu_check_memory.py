"""``gpu_check.py``'s memory comparison (issue #34): per case, the memory model's predicted
peak beside the measured one. On a GPU: ``torch.cuda.max_memory_allocated()`` and
``max_memory_reserved()`` of a steady-state step against the tensors' predicted peak and the
whole prediction (tensors + the GPU priors: the reserve and fixed terms stand in for what
reserved minus allocated, and the context, hold). In CPU mode: the profiler's allocated peak
(``memory_measure.cpu_step_peak``) against the tensors' predicted peak, a code-path check."""

from __future__ import annotations

from typing import Any

MIB = 2**20


def memory_case(workload: str, batch: int, device: str, generation: str | None) -> dict[str, Any]:
    """Predicted (meta trace) and measured peak of one (workload, batch) on ``device``."""
    import torch
    from advisor.probes.operators.torch_workload import trace_on_meta
    from advisor.probes.torch_loop import build_setup, split_batch, to_device
    from memory_measure import cpu_step_peak, cuda_step_peak

    from advisor.prediction.memory.model import step_memory

    trace = trace_on_meta(workload, batch, {})
    tensors = step_memory(trace, device="cpu")
    whole = step_memory(trace, device="gpu", generation=generation) if device == "cuda" else None
    setup, _, _ = build_setup(workload, batch, batch, batch)
    x, y = split_batch(next(iter(setup.train_loader)))
    if device == "cuda":
        dev = torch.device("cuda")
        setup.model.to(dev)
        x, y = to_device((x, y), dev)
        measured = cuda_step_peak(setup.model, setup.loss_fn, setup.optimizer, x, y)
    else:
        measured = {"max_memory_allocated": cpu_step_peak(
            setup.model, setup.loss_fn, setup.optimizer, x, y)}  # fmt: skip
    allocated = measured["max_memory_allocated"]
    out: dict[str, Any] = {
        "predicted_tensors_mib": tensors.bytes / MIB,
        "measured_allocated_mib": allocated / MIB,
        "error_allocated": (tensors.bytes - allocated) / allocated,
        "measured_reserved_mib": None,
        "predicted_gpu_mib": None,
    }
    if whole is not None:
        reserved = measured["max_memory_reserved"]
        out.update(
            measured_reserved_mib=reserved / MIB,
            predicted_gpu_mib=whole.bytes / MIB,
            predicted_gpu_low_mib=whole.low / MIB,
            predicted_gpu_high_mib=whole.high / MIB,
            priors={t.name: t.value / MIB for t in whole.terms if t.prior},
        )
    return out


def line(mem: dict[str, Any]) -> str:
    """One markdown line for a case's table."""
    if "error" in mem:
        return f"memory: not compared ({mem['error']})"
    text = (
        f"memory: predicted tensors {mem['predicted_tensors_mib']:.1f} MiB, measured "
        f"max allocated {mem['measured_allocated_mib']:.1f} MiB "
        f"({mem['error_allocated']:+.1%})"
    )
    if mem["measured_reserved_mib"] is not None:
        text += (
            f"; max reserved {mem['measured_reserved_mib']:.1f} MiB against the whole "
            f"prediction {mem['predicted_gpu_mib']:.1f} MiB "
            f"({mem['predicted_gpu_low_mib']:.1f}-{mem['predicted_gpu_high_mib']:.1f}, "
            "priors included; the CUDA context is in neither measured figure)"
        )
    return text
