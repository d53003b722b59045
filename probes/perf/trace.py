"""Trace one PyTorch training step to refine the performance model's host-side terms.

With torch's own ``TorchDispatchMode`` it counts the framework ops of a step (forward,
backward, optimizer: what an eager GPU run has to launch one by one) and the bytes of the
forward outputs per sample (activation memory traffic); it times the DataLoader alone
(host input pipeline). The results go into a probe's fingerprint under the keys
``perf.signature.signature`` reads: ``ops_per_iteration``, ``activation_bytes_per_sample``,
``data_s``. Imports torch: call it only where torch is wanted.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from advisor.probes.result import ProbeResult

from advisor._lazy import require

TRACE_KEYS = ("ops_per_iteration", "activation_bytes_per_sample", "data_s")


def trace_torch_step(
    workload: str,
    batch_size: int,
    trace_batch: int = 8,
    loader_batches: int = 5,
    hyperparameters: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Ops per training step and forward activation bytes per sample (at ``trace_batch``),
    and the DataLoader's CPU time per batch of ``batch_size``, the fastest of
    ``loader_batches``.

    CPU time (``time.process_time``) and the fastest batch, not the wall-clock median: the
    loader runs on this shared, possibly busy CPU, where waiting for a core only ever adds
    wall time. So a busy local CPU does not move the GPU machines' input term (measured
    run-to-run spread in docs/benchmarks.md).
    """
    require("torch", "torch", "Tracing a training step")
    from advisor.probes.torch_runner import build_setup

    setup, _, _ = build_setup(workload, trace_batch, 2 * trace_batch, None, 0, hyperparameters)
    inputs, targets = next(iter(setup.train_loader))
    counted = trace_module(setup.model, setup.loss_fn, setup.optimizer, inputs, targets)

    big, _, _ = build_setup(
        workload, batch_size, batch_size * loader_batches, None, 0, hyperparameters
    )
    times, it = [], iter(big.train_loader)
    for _ in range(loader_batches):
        start = time.process_time()  # CPU seconds: waiting for a busy CPU does not count
        try:
            next(it)
        except StopIteration:
            break
        times.append(time.process_time() - start)
    result = {
        "ops_per_iteration": counted["ops_per_iteration"],
        "activation_bytes_per_sample": counted["activation_bytes_per_sample"],
    }
    if times:
        result["data_s"] = min(times)
    return result


def trace_module(
    model: Any, loss_fn: Any, optimizer: Any, inputs: Any, targets: Any
) -> dict[str, float]:
    """Count one training step of ``model`` on ``inputs``: framework ops (forward, backward,
    optimizer), bytes of new forward outputs per sample, and FLOPs per sample (torch's
    ``FlopCounterMode``: matmuls and convolutions, forward + backward)."""
    torch = require("torch", "torch", "Tracing a training step")
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    class Counter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops = 0
            self.bytes = 0
            self.forward = True

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            out = func(*args, **(kwargs or {}))
            self.ops += 1
            if self.forward:  # new memory only: views and in-place results share an input's
                inputs = {
                    a.untyped_storage().data_ptr()
                    for a in [*args, *(kwargs or {}).values()]
                    if isinstance(a, torch.Tensor)
                }
                for t in out if isinstance(out, tuple | list) else (out,):
                    if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                        self.bytes += t.numel() * t.element_size()
            return out

    model.train()
    with FlopCounterMode(display=False) as flops, Counter() as counter:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        counter.forward = False
        loss.backward()
        optimizer.step()
        float(loss.detach())
    n = int(inputs.shape[0])
    return {
        "ops_per_iteration": float(counter.ops),
        "activation_bytes_per_sample": counter.bytes / n,
        "flops_per_sample": float(flops.get_total_flops()) / n,
    }


def with_trace(probe: ProbeResult, trace: dict[str, float]) -> ProbeResult:
    """The probe with traced keys added to its fingerprint (existing keys are kept)."""
    fingerprint = {**trace, **probe.fingerprint}
    return dataclasses.replace(probe, fingerprint=fingerprint)
