"""The PyTorch probe and training loop: the same timed loop for a k-iteration probe and a run.

Timing uses PyTorch's own mechanism: an optimizer *step post hook*
(``Optimizer.register_step_post_hook``) stamps ``time.perf_counter()`` at the end of every
training step, after ``torch.cuda.synchronize()`` on CUDA so the stamp is real. Iteration ``i``
lasts from the end of step ``i - 1`` (for the first, from the moment the first batch is ready)
to the end of step ``i``, so it includes fetching the batch, the forward and backward passes
and the update, and the iterations tile the wall clock without gaps. Initialisation is from
the process start (``ProbeRequest.process_start``) to the first batch being ready: interpreter
start, imports, model build, device placement, data generation and the first batch.

:func:`probe_in_process` runs in the child process started by
:func:`advisor.probes.runner.run_probe`; :func:`train` really trains (used by the benchmark's
full runs and by ``python -m advisor.train``). Importing this module imports torch.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from advisor.probes import allocator
from advisor.probes.cpu_layout import NchwPoolingCheck
from advisor.probes.host import cpu_model, peak_rss_bytes
from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.search_spaces.workloads.setups import TorchSetup
from torch.utils.data import DataLoader, Dataset

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)


class StepTimer:
    """Stamps the end of every optimizer step via ``register_step_post_hook``."""

    def __init__(self, optimizer: torch.optim.Optimizer, device: torch.device) -> None:
        self.ends: list[float] = []
        self.cpu: list[float] = []
        self._cuda = device.type == "cuda"
        self._handle = optimizer.register_step_post_hook(self._hook)

    def _hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._cuda:
            torch.cuda.synchronize()
        self.ends.append(time.perf_counter())
        self.cpu.append(time.process_time())

    def remove(self) -> None:
        self._handle.remove()


class LossDiverged(RuntimeError):
    """The training loss became NaN or infinite."""


def configure(threads: int | None, device: str = "cpu") -> tuple[int, torch.device]:
    """Set torch's intra-op threads, flush denormals on CPU and keep freed memory for reuse
    (:func:`advisor.probes.allocator.keep_freed_memory`); return (threads, device)."""
    allocator.keep_freed_memory()
    n = threads or os.cpu_count() or 1
    torch.set_num_threads(n)
    torch.set_flush_denormal(True)
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} requested but CUDA is not available")
    return n, dev


def build_setup(
    workload: str,
    batch_size: int,
    n_train: int | None,
    n_val: int | None,
    seed: int = 0,
    hyperparameters: dict[str, Any] | None = None,
) -> tuple[TorchSetup, int | None, int | None]:
    """Build a workload's setup with ``n_train``/``n_val`` samples (None: the builder's own).

    ``workload`` is a built-in name or a user import path ``module:function``; a user
    function may return a :class:`TorchSetup` or ``(model, loss_fn, optimizer, train_dataset,
    val_dataset)``. Returns the setup and the workload's published sizes (None for user ones).
    """
    from advisor.search_spaces.workloads import get, load_callable

    hp = dict(hyperparameters or {})
    if ":" in workload:
        builder, real_train, real_val = load_callable(workload), None, None
    else:
        spec = get(workload)
        builder, real_train, real_val = spec.builder("torch"), spec.n_train, spec.n_val
    sizes = {k: v for k, v in (("n_train", n_train), ("n_val", n_val)) if v is not None}
    built = builder(batch_size=batch_size, seed=seed, **sizes, **hp)
    return as_setup(built, batch_size, seed), real_train, real_val


def as_setup(built: Any, batch_size: int, seed: int = 0) -> TorchSetup:
    """Accept a TorchSetup or a ``(model, loss_fn, optimizer, train_ds, val_ds)`` tuple."""
    if isinstance(built, TorchSetup):
        return built
    if isinstance(built, tuple | list) and len(built) == 5:
        model, loss_fn, optimizer, train_ds, val_ds = built
        generator = torch.Generator().manual_seed(seed)
        train_loader = _loader(train_ds, batch_size, shuffle=True, generator=generator)
        val_loader = None if val_ds is None else _loader(val_ds, batch_size, shuffle=False)
        return TorchSetup(model, loss_fn, optimizer, train_loader, val_loader)
    raise TypeError(
        "a PyTorch builder must return TorchSetup or (model, loss_fn, optimizer, train_dataset, "
        f"val_dataset), but got {type(built).__name__}"
    )


def _loader(data: Any, batch_size: int, shuffle: bool, generator: Any = None) -> Any:
    if isinstance(data, DataLoader):
        return data
    if not isinstance(data, Dataset):
        raise TypeError(f"expected a torch Dataset or DataLoader, but got {type(data).__name__}")
    return DataLoader(data, batch_size=batch_size, shuffle=shuffle, generator=generator)


def dataset_size(loader: Any) -> int | None:
    """Number of samples behind a DataLoader (None if its dataset has no length)."""
    try:
        return len(loader.dataset)
    except (AttributeError, TypeError):
        return None


def _to(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, tuple | list):
        return type(batch)(_to(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _to(v, device) for k, v in batch.items()}
    return batch


def _split(batch: Any) -> tuple[Any, Any]:
    if isinstance(batch, tuple | list) and len(batch) == 2:
        return batch[0], batch[1]
    raise ValueError(f"a batch must be (inputs, targets), but got {type(batch).__name__}")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _step(setup: TorchSetup, batch: Any, device: torch.device) -> float:
    """One training step on ``batch`` (already on ``device``); returns the loss value."""
    inputs, targets = _split(batch)
    setup.optimizer.zero_grad(set_to_none=True)
    loss = setup.loss_fn(setup.model(inputs), targets)
    loss.backward()
    setup.optimizer.step()
    value = float(loss.detach())
    if not math.isfinite(value):
        raise LossDiverged(f"loss became {value}")
    return value


def validate(
    setup: TorchSetup, device: torch.device, max_batches: int | None = None
) -> tuple[float, float, int, float]:
    """One validation pass under ``torch.no_grad``: (mean loss, accuracy, samples, seconds).

    ``max_batches`` bounds the pass to that many batches (a slice of the validation set).
    Accuracy is the argmax match rate when targets are class indices, else NaN.
    """
    start = time.perf_counter()
    setup.model.eval()
    total_loss, correct, seen = 0.0, 0, 0
    classify = True
    with torch.no_grad():
        for i, batch in enumerate(setup.val_loader):
            if max_batches is not None and i >= max_batches:
                break
            inputs, targets = _split(_to(batch, device))
            out = setup.model(inputs)
            n = int(targets.shape[0]) if hasattr(targets, "shape") and targets.dim() else 1
            total_loss += float(setup.loss_fn(out, targets)) * n
            if classify and out.dim() == 2 and targets.dim() == 1:
                correct += int((out.argmax(dim=1) == targets).sum())
            else:
                classify = False
            seen += n
    _sync(device)
    setup.model.train()
    elapsed = time.perf_counter() - start
    accuracy = correct / seen if classify and seen else float("nan")
    return (total_loss / seen if seen else float("nan")), accuracy, seen, elapsed


def _fingerprint(threads: int, device: torch.device) -> dict[str, Any]:
    device_name = cpu_model()
    if device.type == "cuda":
        device_name = torch.cuda.get_device_name(device)
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


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    oom_type = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    return "out of memory" in str(exc).lower()


FLOP_SLICE = 32  # samples counted by the FLOP counter; the count is scaled to the batch


def flops_per_iteration(setup: TorchSetup, batch: Any) -> float:
    """FLOPs of one forward + backward pass on ``batch``, by ``torch.utils.flop_counter``
    (with the fused CPU LSTM kernels it has no formula for: :mod:`torch_rnn_flops`).

    The counter is slow, and matmul/convolution FLOPs are linear in the batch, so a batch of
    tensors whose first dimension is the batch is counted on its first ``FLOP_SLICE``
    samples and scaled; anything else is counted whole.
    """
    from advisor.probes.torch_rnn_flops import rnn_flop_formulas
    from torch.utils.flop_counter import FlopCounterMode

    inputs, targets = _split(batch)
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


def probe_in_process(request: ProbeRequest, on_progress: ProgressFn | None = None) -> ProbeResult:
    """Time ``request.iterations`` training iterations and two validation passes, here.

    Failures (out of memory, NaN loss, any error in the workload) come back as a result with
    ``status`` oom/nan/error and the reason in ``error``; they are not raised.
    """
    started = request.process_start if request.process_start is not None else time.time()
    try:
        return _probe(request, started, on_progress)
    except Exception as exc:  # reported, not raised: the caller compares many candidates
        status = "nan" if isinstance(exc, LossDiverged) else "oom" if _is_oom(exc) else "error"
        threads = request.threads or os.cpu_count() or 1
        return ProbeResult.failure(
            request,
            status,
            f"{type(exc).__name__}: {exc}",
            time.time() - started,
            framework="torch",
            threads=threads,
            peak_host_memory_bytes=peak_rss_bytes(),
            fingerprint=_fingerprint(threads, torch.device("cpu")),
        )


def _probe(request: ProbeRequest, started: float, on_progress: ProgressFn | None) -> ProbeResult:
    threads, device = configure(request.threads, request.device)
    b, k = request.batch_size, request.iterations
    vb = request.validation_batches
    # Generate only what the probe uses: k batches, and a bounded validation slice.
    user = ":" in request.workload
    gen_val = None if user else b * (vb if vb is not None else 4)
    if not user:
        from advisor.search_spaces.workloads import get

        gen_val = min(gen_val or 0, get(request.workload).n_val) or None
    setup, real_train, real_val = build_setup(
        request.workload,
        b,
        None if user else b * k,
        gen_val,
        request.seed,
        request.hyperparameters,
    )
    n_train = real_train or dataset_size(setup.train_loader) or b * k
    n_val = real_val if real_val is not None else (dataset_size(setup.val_loader) or 0)
    if setup.val_loader is None:
        n_val = 0
    setup.model.to(device)
    setup.model.train()

    timer = StepTimer(setup.optimizer, device)
    batches = iter(setup.train_loader)
    batch = _to(next(batches), device)
    _sync(device)
    ready_wall, ready = time.time(), time.perf_counter()
    first_batch = batch
    for i in range(k):
        if i > 0:
            try:
                batch = _to(next(batches), device)
            except StopIteration:
                batches = iter(setup.train_loader)
                batch = _to(next(batches), device)
        _step(setup, batch, device)
        if on_progress is not None:
            on_progress("iterations", i + 1, k)
        if request.stop_early(i + 1, time.perf_counter() - ready):
            break
    timer.remove()
    stamps = [ready, *timer.ends]
    iterations = tuple(stamps[i + 1] - stamps[i] for i in range(len(stamps) - 1))

    validation: tuple[float, ...] = ()
    measured_val, scale = 0, 1.0
    if setup.val_loader is not None and n_val > 0:
        passes = []
        for p in range(2):
            _, _, seen, seconds = validate(setup, device, vb)
            passes.append(seconds)
            measured_val = seen
            if on_progress is not None:
                on_progress("validation", p + 1, 2)
        scale = n_val / measured_val if measured_val else 1.0
        v1, v2 = passes
        # The first pass's extra cost (warm-up) is paid once, not per batch.
        validation = (max(v1 - v2, 0.0) + v2 * scale, v2 * scale)

    init_s = ready_wall - started
    init_note = "measured: process start to first batch ready"
    if setup.data_s is not None and setup.data_samples and n_train + n_val > setup.data_samples:
        extra = setup.data_s * ((n_train + n_val) / setup.data_samples - 1.0)
        init_s += extra
        init_note = (
            f"measured, plus data preparation scaled from {setup.data_samples} generated "
            f"samples ({setup.data_s:.3f} s) to {n_train + n_val} (+{extra:.3f} s)"
        )

    noise = None  # issue #19: gradient noise scale on the probe's batches, after the timing
    if request.gradient_noise:
        from advisor.probes.gradient_noise import torch_gradient_noise

        batches_on_device = (_to(x, device) for x in setup.train_loader)
        noise = torch_gradient_noise(
            setup.model, setup.loss_fn, batches_on_device, max_seconds=request.max_seconds
        )

    with NchwPoolingCheck() as layout:  # watches the same forward + backward pass
        flops = flops_per_iteration(setup, first_batch)
    peak_acc = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    params = sum(p.numel() for p in setup.model.parameters() if p.requires_grad)
    grad_bytes = sum(
        p.numel() * p.element_size() for p in setup.model.parameters() if p.requires_grad
    )
    median = statistics.median(iterations[1:])
    cpu = None
    span = timer.ends[-1] - timer.ends[0] if len(timer.ends) >= 2 else 0.0
    if span > 0:
        cpu = min(1.0, (timer.cpu[-1] - timer.cpu[0]) / (span * threads))
    fingerprint = _fingerprint(threads, device)
    fingerprint["flops_method"] = "torch.utils.flop_counter.FlopCounterMode, forward + backward"
    fingerprint["init_note"] = init_note
    fingerprint["generated_train_samples"] = dataset_size(setup.train_loader)
    return ProbeResult(
        workload=request.workload,
        framework="torch",
        batch_size=b,
        device=request.device,
        threads=threads,
        init_s=init_s,
        iteration_s=iterations,
        validation_s=validation,
        validation_samples_measured=measured_val,
        validation_scale=scale,
        n_train=n_train,
        n_val=n_val,
        flops_per_iteration=flops,
        parameters=params,
        gradient_bytes=grad_bytes,
        peak_host_memory_bytes=peak_rss_bytes(),
        peak_accelerator_memory_bytes=peak_acc,
        samples_per_s=b / median if median > 0 else None,
        cpu_utilisation=cpu,
        wall_s=time.time() - started,
        fingerprint=fingerprint,
        data_s=setup.data_s,
        data_samples=setup.data_samples or 0,
        warnings=layout.warnings(),
        gradient_noise=noise.to_dict() if noise is not None else None,  # issue #19
    )


def train(
    setup: TorchSetup,
    epochs: int,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
    *,
    device: str = "cpu",
    patience: int | None = None,
) -> dict[str, Any]:
    """Really train ``setup`` for ``epochs`` epochs (each: all training batches, then one
    validation pass), with the same step and timing as the probe.

    ``on_epoch(epoch, metrics)`` is called after each epoch with ``train_loss``, ``val_loss``,
    ``val_accuracy`` and ``epoch_s``. ``patience`` stops early after that many epochs without
    a lower validation loss. Returns ``runtime_s`` (first batch ready to the end),
    ``first_batch_wall`` (``time.time()`` when the first batch was ready), ``epoch_s``,
    ``train_loss``, ``val_loss``, ``val_accuracy`` (per epoch), ``validation_s`` (per pass),
    ``first_iteration_s``, ``steady_iteration_s`` (median of iterations 2..), ``iterations``
    and ``epochs_run``. Raises :class:`LossDiverged` if the loss becomes NaN or infinite.
    """
    if epochs <= 0:
        raise ValueError(f"epochs must be > 0, but got {epochs}")
    dev = torch.device(device)
    setup.model.to(dev)
    setup.model.train()
    timer = StepTimer(setup.optimizer, dev)
    result: dict[str, Any] = {
        "epoch_s": [],
        "train_loss": [],
        "val_loss": [],
        "val_accuracy": [],
        "validation_s": [],
    }
    best, stale = math.inf, 0
    first_wall: float | None = None
    start = epoch_start = 0.0
    try:
        for epoch in range(epochs):
            batches = iter(setup.train_loader)
            batch = _to(next(batches), dev)
            if first_wall is None:
                _sync(dev)
                first_wall, start = time.time(), time.perf_counter()
                epoch_start = start
            total, count = 0.0, 0
            while batch is not None:
                total += _step(setup, batch, dev)
                count += 1
                nxt = next(batches, None)
                batch = None if nxt is None else _to(nxt, dev)
            metrics = {"train_loss": total / max(count, 1)}
            if setup.val_loader is not None:
                loss, acc, _, seconds = validate(setup, dev)
                metrics.update(val_loss=loss, val_accuracy=acc)
                result["validation_s"].append(seconds)
            if setup.scheduler is not None:
                setup.scheduler.step()
            now = time.perf_counter()
            metrics["epoch_s"] = now - epoch_start
            epoch_start = now
            result["epoch_s"].append(metrics["epoch_s"])
            result["train_loss"].append(metrics["train_loss"])
            result["val_loss"].append(metrics.get("val_loss", float("nan")))
            result["val_accuracy"].append(metrics.get("val_accuracy", float("nan")))
            if on_epoch is not None:
                on_epoch(epoch, metrics)
            if patience is not None and "val_loss" in metrics:
                if metrics["val_loss"] < best:
                    best, stale = metrics["val_loss"], 0
                else:
                    stale += 1
                    if stale >= patience:
                        break
    finally:
        timer.remove()
    stamps = [start, *timer.ends]
    iterations = [stamps[i + 1] - stamps[i] for i in range(len(timer.ends))]
    result.update(
        runtime_s=time.perf_counter() - start,
        first_batch_wall=first_wall,
        first_iteration_s=iterations[0] if iterations else None,
        steady_iteration_s=statistics.median(iterations[1:]) if len(iterations) > 1 else None,
        iterations=len(iterations),
        epochs_run=len(result["epoch_s"]),
    )
    return result
