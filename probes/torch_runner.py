"""The PyTorch probe: the hooks of :class:`~advisor.probes.framework.FrameworkRunner`.

The timed loop is :mod:`advisor.probes.torch_loop` (an optimizer step post hook stamps every
step); this module builds the workload, runs k steps and two validation passes through it,
counts FLOPs with ``torch.utils.flop_counter`` and says what counts as out of memory.
Initialisation is from the process start (``ProbeRequest.process_start``) to the first batch
being ready: interpreter start, imports, model build, device placement, data generation and
the first batch.

:func:`probe_in_process` runs in the child process started by
:func:`advisor.probes.runner.run_probe`. The training-loop names (:func:`train`,
:func:`build_setup`, :func:`configure`, ...) are re-exported from
:mod:`advisor.probes.torch_loop` for their callers. Importing this module imports torch.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from typing import Any

import torch

# What every training process imports at its first optimizer (torch.optim's add_param_group
# and step import torch._dynamo: 2-3 s on this 2-core machine), imported with the runner so
# that it falls in the measured imports: the later probes of a shared process count it in
# their initialisation as the first one does (it had 13.5 s, the later ones 10.5-11.2 s)
import torch._dynamo
from advisor.probes import allocator
from advisor.probes.cpu_layout import NchwPoolingCheck
from advisor.probes.framework import FrameworkRunner, Prepared, TimeBox, Timed
from advisor.probes.gradient_noise import NOISE_BATCHES, NoiseScale
from advisor.probes.host import cpu_model
from advisor.probes.result import ProbeRequest
from advisor.probes.torch_loop import (
    LossDiverged,
    StepTimer,
    as_setup,
    build_setup,
    configure,
    dataset_size,
    loader_batch_cpu_s,
    split_batch,
    sync,
    to_device,
    train,
    train_step,
    validate,
)
from advisor.search_spaces.workloads import ModelRef
from advisor.search_spaces.workloads.setups import TorchSetup

__all__ = [
    "FLOP_SLICE",
    "LossDiverged",
    "TorchRunner",
    "as_setup",
    "build_setup",
    "configure",
    "dataset_size",
    "flops_per_iteration",
    "probe_in_process",
    "train",
    "validate",
]

FLOP_SLICE = 32  # samples counted by the FLOP counter; the count is scaled to the batch
FLOPS_METHOD = "torch.utils.flop_counter.FlopCounterMode, forward + backward"
# What PyTorch's CPU allocator raises (a plain RuntimeError) when malloc fails.
CPU_ALLOCATION_FAILURE = "DefaultCPUAllocator: can't allocate memory"


def flops_per_iteration(setup: TorchSetup, batch: Any) -> float:
    """FLOPs of one forward + backward pass on ``batch``, by ``torch.utils.flop_counter``
    (with the fused CPU LSTM kernels it has no formula for: :mod:`torch_rnn_flops`).

    The counter is slow, and matmul/convolution FLOPs are linear in the batch, so a batch of
    tensors whose first dimension is the batch is counted on its first ``FLOP_SLICE``
    samples and scaled; anything else is counted whole.
    """
    from advisor.probes.torch_rnn_flops import rnn_flop_formulas
    from torch.utils.flop_counter import FlopCounterMode

    inputs, targets = split_batch(batch)
    n = len(inputs) if isinstance(inputs, torch.Tensor) else 0
    scale = 1.0
    if n > FLOP_SLICE and isinstance(targets, torch.Tensor) and len(targets) == n:
        inputs, targets, scale = inputs[:FLOP_SLICE], targets[:FLOP_SLICE], n / FLOP_SLICE
    setup.optimizer.zero_grad(set_to_none=True)
    with FlopCounterMode(display=False, custom_mapping=rnn_flop_formulas()) as counter:
        loss = setup.loss_fn(setup.model(inputs), targets)
        loss.backward()
    setup.optimizer.zero_grad(set_to_none=True)
    return float(counter.get_total_flops()) * scale


@dataclass
class _State:
    setup: TorchSetup
    device: torch.device
    first_batch: Any = None
    warnings: tuple[str, ...] = field(default_factory=tuple)


class TorchRunner(FrameworkRunner):
    """PyTorch: a Python loop over the DataLoader, timed by an optimizer step post hook."""

    name = "torch"

    def configure(self, request: ProbeRequest) -> int:
        threads, _ = configure(request.threads, request.device)
        return threads

    def prepare(self, request: ProbeRequest) -> Prepared:
        b, k, vb = request.batch_size, request.iterations, request.validation_batches
        # Generate only what the probe uses: k batches, and a bounded validation slice.
        user = ModelRef(request.workload).is_user
        gen_val = None
        if not user:
            from advisor.search_spaces.workloads import get

            gen_val = min(b * (vb if vb is not None else 4), get(request.workload).n_val) or None
        # issue #19: a noise-measuring probe generates more batches for the measurement
        gen_k = max(k, NOISE_BATCHES) if request.gradient_noise else k
        setup, real_train, real_val = build_setup(
            request.workload,
            b,
            None if user else b * gen_k,
            gen_val,
            request.seed,
            request.hyperparameters,
        )
        n_train = real_train or dataset_size(setup.train_loader) or b * k
        n_val = real_val if real_val is not None else (dataset_size(setup.val_loader) or 0)
        device = torch.device(request.device)
        setup.model.to(device)
        setup.model.train()
        return Prepared(
            state=_State(setup, device),
            n_train=n_train,
            n_val=0 if setup.val_loader is None else n_val,
            data_s=setup.data_s,
            data_samples=setup.data_samples or 0,
            prepare_s=setup.data_s,
            prepare_detail=f"{setup.data_s or 0:.3f} s",
            generated_train_samples=dataset_size(setup.train_loader),
        )

    def run_iterations(self, prepared: Prepared, request: ProbeRequest, box: TimeBox) -> Timed:
        state: _State = prepared.state
        setup, device = state.setup, state.device
        timer = StepTimer(setup.optimizer, device)
        try:
            batches = iter(setup.train_loader)
            batch = to_device(next(batches), device)
            sync(device)
            ready_wall, ready, ready_cpu = time.time(), time.perf_counter(), time.process_time()
            box.start()
            state.first_batch = batch
            for i in range(request.iterations):
                if i > 0:
                    try:
                        batch = to_device(next(batches), device)
                    except StopIteration:
                        batches = iter(setup.train_loader)
                        batch = to_device(next(batches), device)
                train_step(setup, batch, device)
                if box.after_step():
                    break
        finally:
            timer.remove()
        stamps = [ready, *timer.ends]
        iterations = tuple(stamps[i + 1] - stamps[i] for i in range(len(stamps) - 1))
        return Timed(iterations, timer.ends, timer.cpu, ready_wall, ready_cpu)

    def validation_pass(self, prepared: Prepared, request: ProbeRequest) -> tuple[float, int]:
        state: _State = prepared.state
        _, _, seen, seconds = validate(state.setup, state.device, request.validation_batches)
        return seconds, seen

    def flops(self, prepared: Prepared, request: ProbeRequest) -> tuple[float | None, str]:
        state: _State = prepared.state
        with NchwPoolingCheck() as layout:  # watches the same forward + backward pass
            flops = flops_per_iteration(state.setup, state.first_batch)
        state.warnings = layout.warnings()
        return flops, FLOPS_METHOD

    def input_bytes_per_sample(self, prepared: Prepared, request: ProbeRequest) -> float | None:
        """Issue #27: the first batch's input tensors' bytes over the batch size."""
        inputs, _ = split_batch(prepared.state.first_batch)
        tensors = inputs if isinstance(inputs, list | tuple) else [inputs]
        total = sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
        return total / request.batch_size if total else None

    def loader_batch_s(self, prepared: Prepared, request: ProbeRequest) -> float | None:
        """The training DataLoader's CPU seconds per batch (``loader_batch_cpu_s``), on the
        data this probe built: a GPU row's input term without building the data again."""
        seconds, _, _ = loader_batch_cpu_s(prepared.state.setup.train_loader)
        return seconds

    def model_size(self, prepared: Prepared) -> tuple[int, int]:
        trainable = [p for p in prepared.state.setup.model.parameters() if p.requires_grad]
        return (
            sum(p.numel() for p in trainable),
            sum(p.numel() * p.element_size() for p in trainable),
        )

    def peak_accelerator_memory(self, prepared: Prepared) -> int | None:
        device = prepared.state.device
        return int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None

    def warnings(self, prepared: Prepared) -> tuple[str, ...]:
        return tuple(prepared.state.warnings)

    def gradient_noise(self, prepared: Prepared, request: ProbeRequest) -> NoiseScale | None:
        """Issue #19: ``B_simple`` on the probe's training batches, after the timing."""
        from advisor.probes.gradient_noise_frameworks import torch_gradient_noise

        state: _State = prepared.state
        setup, device = state.setup, state.device
        batches = (split_batch(to_device(b, device)) for b in setup.train_loader)
        return torch_gradient_noise(setup.model, setup.loss_fn, batches)  # own time box

    def is_oom(self, exc: BaseException) -> bool:
        """MemoryError, ``torch.OutOfMemoryError`` (CUDA and other accelerators), or the
        RuntimeError PyTorch's CPU allocator raises when an allocation fails."""
        if isinstance(exc, MemoryError | torch.OutOfMemoryError):
            return True
        return isinstance(exc, RuntimeError) and CPU_ALLOCATION_FAILURE in str(exc)

    def fingerprint(self, threads: int, device: str) -> dict[str, Any]:
        dev = torch.device(device)
        device_name = cpu_model()
        if dev.type == "cuda":
            device_name = torch.cuda.get_device_name(dev)
        return {
            "framework": "torch",
            "torch": torch.__version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpu_model": cpu_model(),
            "device_name": device_name,
            "cpu_count": os.cpu_count(),
            "threads": threads,
            "allocator": allocator.describe(),
            "cuda": torch.version.cuda,
            "gpus": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        }


RUNNER = TorchRunner()
probe_in_process = RUNNER.probe_in_process
