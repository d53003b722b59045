"""The input pipeline measured here: the DataLoader's CPU time per batch of a PyTorch workload.

A cloud GPU's input term is its host's DataLoader time per sample plus the host-to-device copy
(``timing.accel``); the loader is the same Python code on any host, so it is timed on this CPU:
in CPU seconds (``time.process_time``) and the fastest of a few batches, so that waiting for a
busy shared core does not count (run-to-run spread in docs/benchmarks.md). The batches are
read in ``passes`` passes over the same few batches: a process's first batches fault in fresh
memory pages for each collated batch (measured for fcn at batch 512: about 2,048 minor page
faults, 6-13 ms a batch, against 2.4-2.8 ms and no faults once the allocator reuses its
pages, which it may not do before the fifth batch), and a training run's thousands of steps
see the steady state. With one pass the reading was bimodal between processes, which moved
``advisor suggest``'s answer between batch sizes (docs/benchmarks.md, "The first answer");
with six, fcn's batches 256-1024 read 4.6-5.1 us a sample in six fresh processes (a batch of
32 MB or more, fcn's 2048, is mapped fresh by glibc every time, in training too, and varies).
A loader with worker processes starts them at every pass, so it gets two. A probe reads its
own loader the same way after its timed steps (``probes.torch_loop.loader_batch_cpu_s``); this
module times one for a probe without that reading (older caches, a probe short of time, the
stand-ins of models not timed here). The model itself is not needed: with ``model_on_meta`` it is built on the meta device (a model too big for this
machine); data a builder makes with torch factories there are meta tensors too, and then the
loader cannot be timed (None: the prior stays).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from advisor._lazy import require


@dataclass(frozen=True)
class LoaderTiming:
    """The fastest of ``batches`` DataLoader batches in CPU seconds (``data_s``; None when
    not timed), the bytes of one sample's inputs, the builder's dataset sizes (None when it
    gave none), and why not timed."""

    data_s: float | None
    input_bytes_per_sample: float | None
    n_train: int | None
    n_val: int | None
    note: str = ""


def time_loader(
    workload: str,
    batch_size: int,
    hyperparameters: dict[str, Any] | None = None,
    batches: int = 5,
    model_on_meta: bool = False,
    own_sizes: bool = False,
    passes: int = 6,
) -> LoaderTiming:
    """Time ``batches`` batches of ``workload``'s training DataLoader at ``batch_size``, in
    ``passes`` passes over them (the fastest counts; see above).

    ``own_sizes``: build with the builder's own dataset sizes (a user model, whose sizes are
    learnt here) instead of just enough samples for the timed batches."""
    torch = require("torch", "torch", "Timing the input pipeline")
    from advisor.probes.torch_loop import build_setup, dataset_size, loader_batch_cpu_s

    sizes = (None, None) if own_sizes else (batch_size * batches, None)
    context = torch.device("meta") if model_on_meta else nullcontext()
    with context, warnings.catch_warnings(), _optimizer_without_dynamo(torch):
        warnings.simplefilter("ignore")
        setup, _, _ = build_setup(workload, batch_size, *sizes, 0, hyperparameters)
    n_train = dataset_size(setup.train_loader)
    n_val = dataset_size(setup.val_loader) if setup.val_loader is not None else 0
    data_s, in_bytes, why = loader_batch_cpu_s(setup.train_loader, batches, passes)
    return LoaderTiming(data_s, in_bytes, n_train, n_val, why)


@contextmanager
def _optimizer_without_dynamo(torch: Any) -> Iterator[None]:
    """The workload's optimizer built without importing ``torch._dynamo`` (issue #46).

    Only the loader is timed here, but a builder makes its optimizer too, and PyTorch's
    ``Optimizer.add_param_group`` (wrapped by ``torch._disable_dynamo``) imports
    ``torch._dynamo`` at its first call: 1.1-1.6 s of fcn's 5-6 s first answer on this 2-core
    machine. The wrapper keeps what it made on the wrapped function (``__dynamo_disable``);
    set to the function itself while the setup is built, nothing is imported, and taken off
    after, nothing stays changed (dynamo's "disable" matters only under ``torch.compile``,
    which never runs here). Where PyTorch renames that private attribute, the import happens
    as before."""
    fn = getattr(torch.optim.Optimizer.add_param_group, "__wrapped__", None)
    ours = (
        fn is not None
        and "torch._dynamo" not in sys.modules
        and getattr(fn, "__dynamo_disable", None) is None
    )
    if ours:
        setattr(fn, "__dynamo_disable", fn)
    try:
        yield
    finally:
        if ours and getattr(fn, "__dynamo_disable", None) is fn:
            delattr(fn, "__dynamo_disable")
