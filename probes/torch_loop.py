"""The PyTorch training step, validation pass and training run, shared by probe and run.

Timing uses PyTorch's own mechanism: an optimizer *step post hook*
(``Optimizer.register_step_post_hook``, :class:`StepTimer`) stamps ``time.perf_counter()`` at
the end of every training step, after ``torch.cuda.synchronize()`` on CUDA so the stamp is
real. Iteration ``i`` lasts from the end of step ``i - 1`` (for the first, from the moment the
first batch is ready) to the end of step ``i``, so it includes fetching the batch, the forward
and backward passes and the update, and the iterations tile the wall clock without gaps.

:func:`train` really trains (used by the benchmark's full runs and by
``python -m advisor.train``) with the same step and timing as the probe
(:mod:`advisor.probes.torch_runner`). Importing this module imports torch.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from advisor.probes import allocator
from advisor.probes.framework import LossDiverged
from advisor.search_spaces.workloads import ModelRef
from advisor.search_spaces.workloads.setups import TorchSetup
from torch.utils.data import DataLoader, Dataset

__all__ = [
    "LossDiverged",
    "StepTimer",
    "as_setup",
    "build_setup",
    "configure",
    "dataset_size",
    "split_batch",
    "sync",
    "to_device",
    "train",
    "train_step",
    "validate",
]


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
    if ModelRef(workload).is_user:
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


def loader_batch_cpu_s(
    loader: Any, batches: int = 5, passes: int = 6
) -> tuple[float | None, float | None, str]:
    """The DataLoader's CPU seconds per batch: the fastest of its first ``batches`` batches,
    read in ``passes`` passes (two for a loader with worker processes: each pass starts them
    again), and the bytes of one sample's inputs; ``(None, None, why)`` when not timed (a
    loader of meta tensors, or no batch). CPU seconds (``time.process_time``): waiting for a
    busy core does not count; several passes: the first batches of a process fault in fresh
    pages, a run's thousands of steps do not (``advisor.prediction.step.loader``)."""
    times: list[float] = []
    in_bytes = None
    if getattr(loader, "num_workers", 0):
        passes = min(passes, 2)
    for _ in range(passes):
        it = iter(loader)
        for _ in range(batches):
            start = time.process_time()
            try:
                batch = next(it)
            except StopIteration:
                break
            times.append(time.process_time() - start)
            if in_bytes is None:
                inputs, _ = split_batch(batch)
                tensors = _tensors(inputs)
                if any(t.device.type == "meta" for t in tensors):
                    return None, None, "the loader makes meta tensors"
                n = max(1, int(tensors[0].shape[0])) if tensors else 1
                in_bytes = sum(t.numel() * t.element_size() for t in tensors) / n
    if not times:
        return None, None, "no batch"
    return min(times), in_bytes, ""


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value`` (a tensor, or lists, tuples and dicts of them)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    return []


def to_device(batch: Any, device: torch.device) -> Any:
    """``batch`` (a tensor, or tuples, lists and dicts of them) moved to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, tuple | list):
        return type(batch)(to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch


def split_batch(batch: Any) -> tuple[Any, Any]:
    """``(inputs, targets)`` of a batch; anything else is a ValueError."""
    if isinstance(batch, tuple | list) and len(batch) == 2:
        return batch[0], batch[1]
    raise ValueError(f"a batch must be (inputs, targets), but got {type(batch).__name__}")


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); a no-op on CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize()


def train_step(setup: TorchSetup, batch: Any, device: torch.device) -> float:
    """One training step on ``batch`` (already on ``device``); returns the loss value."""
    inputs, targets = split_batch(batch)
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
            inputs, targets = split_batch(to_device(batch, device))
            out = setup.model(inputs)
            n = int(targets.shape[0]) if hasattr(targets, "shape") and targets.dim() else 1
            total_loss += float(setup.loss_fn(out, targets)) * n
            if classify and out.dim() == 2 and targets.dim() == 1:
                correct += int((out.argmax(dim=1) == targets).sum())
            else:
                classify = False
            seen += n
    sync(device)
    setup.model.train()
    elapsed = time.perf_counter() - start
    accuracy = correct / seen if classify and seen else float("nan")
    return (total_loss / seen if seen else float("nan")), accuracy, seen, elapsed


def _steady_step_s(ends: list[float]) -> float | None:
    """The median step time of one epoch's steps 2..n (``ends``: each step's end)."""
    steps = [b - a for a, b in itertools.pairwise(ends)]
    return statistics.median(steps) if steps else None


def train(
    setup: TorchSetup,
    epochs: int,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
    *,
    device: str = "cpu",
    patience: int | None = None,
    step: Callable[[TorchSetup, Any, torch.device], float] | None = None,
) -> dict[str, Any]:
    """Really train ``setup`` for ``epochs`` epochs (each: all training batches, then one
    validation pass), with the same step and timing as the probe.

    ``on_epoch(epoch, metrics)`` is called after each epoch with ``train_loss``, ``val_loss``,
    ``val_accuracy``, ``epoch_s`` and ``step_s`` (the median seconds per training step of
    that epoch's steps 2..n, each from the previous step's end to its own, as the probe times
    them; absent when the epoch had one step). ``patience`` stops early after that many epochs without
    a lower validation loss. ``step``: the training step (default ``train_step``; a training
    plan's, ``advisor.train.plan_step``). Returns ``runtime_s`` (first batch ready to the end),
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
            batch = to_device(next(batches), dev)
            if first_wall is None:
                sync(dev)
                first_wall, start = time.time(), time.perf_counter()
                epoch_start = start
            total, count, first_step = 0.0, 0, len(timer.ends)
            while batch is not None:
                total += (step or train_step)(setup, batch, dev)
                count += 1
                nxt = next(batches, None)
                batch = None if nxt is None else to_device(nxt, dev)
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
            step_s = _steady_step_s(timer.ends[first_step:])
            if step_s is not None:
                metrics["step_s"] = step_s
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
