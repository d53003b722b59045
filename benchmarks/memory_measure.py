"""A training step's measured peak of allocated bytes, on the CPU or a GPU (issue #34).

The allocator's own figures, not RSS: on the CPU the torch profiler's memory records
(``profile_memory=True``: each allocation and free of PyTorch's CPU allocator carries the
allocator's running total of allocated bytes, ``total_allocated``); on a GPU
``torch.cuda.max_memory_allocated()`` / ``max_memory_reserved()``. The profiler's total
counts only allocations it saw, so the step's peak is the bytes of the tensors the step
starts with (parameters, buffers, optimizer state, the batch: their storages' sizes) plus the
largest rise of the allocator's total during the step. The step is steady state (a first
step creates the optimizer state) and uses the multi-tensor optimizer a GPU defaults to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def one_step(
    model: Any, loss_fn: Callable[[Any, Any], Any], optimizer: Any, x: Any, y: Any
) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss_fn(model(x), y).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def live_bytes(*trees: Any) -> int:
    """Bytes of the distinct storages of the tensors in ``trees`` (modules' parameters and
    buffers, optimizers' state included)."""
    import torch
    from torch.utils._pytree import tree_leaves

    seen: dict[int, int] = {}

    def add(t: Any) -> None:
        if isinstance(t, torch.Tensor):
            st = t.untyped_storage()
            seen[st._cdata] = int(st.nbytes())

    for tree in trees:
        if isinstance(tree, torch.nn.Module):
            for t in (*tree.parameters(), *tree.buffers()):
                add(t)
        elif isinstance(tree, torch.optim.Optimizer):
            for state in tree.state.values():
                for v in state.values():
                    add(v)
        else:
            for leaf in tree_leaves(tree):
                add(leaf)
    return sum(seen.values())


def cpu_step_peak(model: Any, loss_fn: Any, optimizer: Any, x: Any, y: Any) -> int:
    """The measured peak of allocated bytes of one steady-state CPU training step."""
    from advisor.probes.operators.optimizer import cuda_default_foreach
    from torch.profiler import ProfilerActivity, profile

    model.train()
    with cuda_default_foreach(optimizer), _fused_dropout():
        one_step(model, loss_fn, optimizer, x, y)  # creates the optimizer state
        base = live_bytes(model, optimizer, (x, y))
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            one_step(model, loss_fn, optimizer, x, y)
    totals = allocation_totals(prof)
    if not totals:
        return base
    start = totals[0][0] - totals[0][1]
    return base + max(0, max(t for t, _ in totals) - start)


def _fused_dropout() -> Any:
    """Within: ``F.dropout`` / ``torch.dropout`` run as ``native_dropout`` (CUDA's path)."""
    import torch
    from advisor.probes.operators.torch_trace import fused_dropout
    from torch.overrides import TorchFunctionMode

    class Mode(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            if func is torch.nn.functional.dropout or func is torch.dropout:
                out = fused_dropout(func is torch.dropout, *args, **kwargs)
                if out is not None:
                    return out
            return func(*args, **kwargs)

    return Mode()


def allocation_totals(prof: Any) -> list[tuple[int, int]]:
    """``(total_allocated, alloc_size)`` of every allocation event, in time order."""
    from torch._C._profiler import _EventType

    found: list[tuple[int, int, int]] = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.tag == _EventType.Allocation:
            f = node.extra_fields
            found.append((node.start_time_ns, int(f.total_allocated), int(f.alloc_size)))
    found.sort()
    return [(t, a) for _, t, a in found]


def cuda_step_peak(model: Any, loss_fn: Any, optimizer: Any, x: Any, y: Any) -> dict[str, int]:
    """On a GPU: ``max_memory_allocated`` and ``max_memory_reserved`` of a steady-state step
    (statistics reset after the first step)."""
    import torch

    model.train()
    one_step(model, loss_fn, optimizer, x, y)
    torch.cuda.synchronize()
    # issue #45: an earlier case's cached blocks would count in this one's reserved peak
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    one_step(model, loss_fn, optimizer, x, y)
    torch.cuda.synchronize()
    return {
        "max_memory_allocated": int(torch.cuda.max_memory_allocated()),
        "max_memory_reserved": int(torch.cuda.max_memory_reserved()),
    }


def cpu_peak(step: Callable[[], Any], setup: Any, batch: Any, warm_up: int = 2) -> int:
    """The measured peak of allocated bytes of one steady ``step()`` of a training ``setup``
    (its model, optimizer and the ``batch``; sharded tensors by their local shards): ``warm_up``
    steps first (optimizer state, DDP's rebuilt buckets), then the bytes live before the step
    plus the largest rise of the allocator's total during it (the profiler's records).

    The gradients the last step left are released first, as the step itself does on entry
    (``zero_grad``; DDP's bucket views are zeroed in place and stay): the profiler cannot
    subtract the free of a block allocated before it started, so they would count twice."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warm_up):
        step()
    keep = bool(getattr(setup.model, "gradient_as_bucket_view", False))
    setup.optimizer.zero_grad(set_to_none=not keep)
    base = local_bytes(setup.model, setup.optimizer, batch)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    totals = allocation_totals(prof)
    if not totals:
        return base
    start = totals[0][0] - totals[0][1]
    return base + max(0, max(t for t, _ in totals) - start)


def local_bytes(model: Any, optimizer: Any, batch: Any) -> int:
    """Bytes of the distinct storages this process holds for ``model`` (parameters, their
    gradients, buffers), ``optimizer``'s state (ZeRO-1's local part) and ``batch`` (a
    DTensor by its local shard)."""
    import torch
    from torch.utils._pytree import tree_leaves

    seen: dict[int, int] = {}

    def add(t: Any) -> None:
        if isinstance(t, torch.Tensor):
            local = t.to_local() if hasattr(t, "to_local") else t
            storage = local.untyped_storage()
            seen[storage.data_ptr()] = int(storage.nbytes())

    for p in model.parameters():
        add(p)
        add(p.grad)
    for b in model.buffers():
        add(b)
    inner = getattr(optimizer, "optim", optimizer)
    for state in inner.state.values():
        for v in state.values():
            add(v)
    for leaf in tree_leaves(batch):
        add(leaf)
    return sum(seen.values())
