"""Trace a PyTorch workload (built-in name or user ``module:function``) at a batch size.

Two ways (:func:`trace_torch_workload`):

- **meta** (the default): the builder runs under ``torch.device("meta")``, so the model's
  parameters (and any data it makes with torch) are shapes without memory; a batch of the
  dataset's sample shapes and dtypes is made on the meta device at the batch size and the
  step is traced without computing anything. A 1-3 billion parameter model traces in
  seconds and no memory.
- **executed** (the fallback when the meta trace fails: an op without a meta kernel, control
  flow on tensor values, a builder that cannot build on the meta device): the workload is
  built for real with one batch of data and one real CPU step is traced.

``OperatorTrace.executed`` and ``notes`` say which was used and why.
"""

from __future__ import annotations

import time
import warnings
from contextlib import nullcontext
from typing import Any

from advisor.probes.operators.torch_trace import trace_step
from advisor.probes.operators.types import OperatorTrace

MODES = ("auto", "meta", "executed")


def trace_torch_workload(
    workload: str,
    batch_size: int,
    hyperparameters: dict[str, Any] | None = None,
    mode: str = "auto",
    seed: int = 0,
) -> OperatorTrace:
    """The operator trace of one training step of ``workload`` at ``batch_size``.

    ``mode``: ``meta`` (shapes only; raises if the step cannot run on the meta device),
    ``executed`` (one real CPU step), ``auto`` (meta, else executed, with the reason noted).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, but got {mode!r}")
    if batch_size <= 0:
        raise ValueError(f"batch_size must be > 0, but got {batch_size}")
    if workload.startswith("hf:") and mode != "executed":  # issue #48: a deep model, carried
        from advisor.probes.operators.layer_scaling import scaled_trace

        def shallow(w: str) -> OperatorTrace:
            return trace_torch_workload(w, batch_size, hyperparameters, mode, seed)

        scaled = scaled_trace(workload, shallow)
        if scaled is not None:
            return scaled
    elif mode != "executed":  # issue #46: a builder that declares its depth, likewise
        from advisor.probes.operators.layer_scaling import scaled_declared_trace

        def shallower(hps: dict[str, Any]) -> OperatorTrace:
            return trace_torch_workload(workload, batch_size, hps, mode, seed)

        scaled = scaled_declared_trace(workload, hyperparameters, shallower)
        if scaled is not None:
            return scaled
    hp = dict(hyperparameters or {})
    start = time.perf_counter()
    notes: tuple[str, ...] = ()
    if mode != "executed":
        try:
            trace = trace_on_meta(workload, batch_size, hp, seed)
            return _timed(trace, start)
        except Exception as exc:
            if mode == "meta":
                raise
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            notes = (f"meta-device trace failed ({reason}); traced a real CPU step",)
    return _timed(trace_executed(workload, batch_size, hp, seed, notes), start)


def trace_on_meta(
    workload: str, batch_size: int, hyperparameters: dict[str, Any], seed: int = 0
) -> OperatorTrace:
    """Build under ``torch.device("meta")`` and trace a meta batch of ``batch_size``."""
    import torch
    from advisor.probes.torch_loop import build_setup

    small = min(batch_size, 8)  # builders that make real (numpy) data make little of it
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setup, _, _ = build_setup(workload, batch_size, small, small, seed, hyperparameters)
    return _trace_setup(setup, meta_batch(setup.train_loader, batch_size), workload, batch_size)


def trace_executed(
    workload: str,
    batch_size: int,
    hyperparameters: dict[str, Any],
    seed: int = 0,
    notes: tuple[str, ...] = (),
) -> OperatorTrace:
    """Build for real with one batch of data and trace one real CPU training step."""
    import torch
    from advisor.probes.torch_loop import build_setup
    from advisor.search_spaces.workloads import ModelRef

    user = ModelRef(workload).is_user
    n = None if user else batch_size
    setup, _, _ = build_setup(workload, batch_size, n, n, seed, hyperparameters)
    batch = next(iter(setup.train_loader))
    # CPU recurrent layers run as one oneDNN op; without oneDNN they decompose into the
    # per-time-step products and gates the meta trace (and a GPU) shows.
    recurrent = any(isinstance(m, torch.nn.RNNBase) for m in setup.model.modules())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        flags = torch.backends.mkldnn.flags(enabled=False) if recurrent else nullcontext()
        with flags:
            return _trace_setup(setup, batch, workload, batch_size, notes)


def _trace_setup(
    setup: Any, batch: Any, workload: str, batch_size: int, notes: tuple[str, ...] = ()
) -> OperatorTrace:
    """One training step of a built ``setup`` on ``batch`` (``(inputs, targets)``), traced."""
    from advisor.probes.torch_loop import split_batch

    inputs, targets = split_batch(batch)
    return trace_step(
        setup.model,
        setup.loss_fn,
        setup.optimizer,
        inputs,
        targets,
        workload=workload,
        batch_size=batch_size,
        notes=notes,
    )


def meta_batch(loader: Any, batch_size: int) -> Any:
    """A batch of ``batch_size`` on the meta device with the loader's sample shapes and
    dtypes: one sample collated by the loader's own ``collate_fn``, each tensor widened to
    the batch (an iterable dataset's first batch is read instead)."""
    import torch
    from torch.utils._pytree import tree_map

    dataset = getattr(loader, "dataset", None)
    collate = getattr(loader, "collate_fn", None)
    if dataset is not None and collate is not None and hasattr(dataset, "__getitem__"):
        one = collate([dataset[0]])
    else:
        one = next(iter(loader))

    def widen(x: Any) -> Any:
        if not isinstance(x, torch.Tensor) or x.dim() == 0:
            return x
        return torch.empty((batch_size, *x.shape[1:]), dtype=x.dtype, device="meta")

    return tree_map(widen, one)


def _timed(trace: OperatorTrace, start: float) -> OperatorTrace:
    import dataclasses

    took = f"traced in {time.perf_counter() - start:.2f} s"
    return dataclasses.replace(trace, notes=(*trace.notes, took))
