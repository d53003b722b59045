"""The optimizer step as CUDA runs it: multi-tensor (``foreach``) kernels, counted in launches.

On CUDA, ``torch.optim`` SGD, Adam, AdamW (and the other optimizers with a ``foreach``
option) default to the multi-tensor implementation: each update line is one ``_foreach_*``
op over all parameters of a (device, dtype) group, which ``multi_tensor_apply`` splits into a
few kernel launches (:mod:`advisor.probes.operators.multi_tensor`). On the CPU or the meta
device the same optimizers default to a Python loop over the parameters, so the tracer sets
``foreach=True`` for the traced step where the builder left it to PyTorch's default
(:func:`cuda_default_foreach`) and records each ``_foreach_*`` (or ``_fused_*``) op as an
``optimizer`` operator (:func:`multi_tensor_records`) whose ``count`` is its launches per step.
An optimizer the builder set to ``foreach=False`` is traced as its per-parameter kernels;
``fused=True`` as its fused kernels. The step counters PyTorch keeps on the host (0-dim
``state["step"]`` tensors of a non-capturable optimizer) launch no GPU kernel.

``dims`` of an ``optimizer`` record are per launch (averaged over the op's launches):
``numel`` elements of the first list, ``tensors`` tensors, ``blocks`` thread blocks, and
``depth`` (tensor lists the kernel walks), ``foreach`` 1. Bytes per launch: each list read
once and each written list written once (an in-place or out-of-place op writes one list; a
fused optimizer writes all but the gradients). FLOPs: a nominal one per element per list.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from advisor.probes.operators.aten_ops import DeviceTest
from advisor.probes.operators.multi_tensor import launches
from advisor.probes.operators.tensors import dtype_name
from advisor.probes.operators.types import Operator

NORMS = {"_foreach_norm", "_foreach_max"}  # per-tensor reductions: a cleanup kernel after


def is_multi_tensor(func: Any) -> bool:
    """Whether ``func`` is a multi-tensor op (``aten._foreach_*`` or ``aten._fused_*``)."""
    return func.namespace == "aten" and func._opname.startswith(("_foreach_", "_fused_"))


def multi_tensor_records(
    func: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    phase: str,
    on_device: DeviceTest,
    cuda_major: int = 12,
) -> list[Operator]:
    """The ``optimizer`` record of one multi-tensor op: its CUDA launches and their traffic;
    empty when its tensors are host tensors (step counters) or all empty."""
    import torch

    short = func._opname
    bound = _bind(func, args, kwargs)
    lists: list[tuple[str, list[Any]]] = [
        (name, list(v))
        for name, v in bound
        if isinstance(v, list | tuple) and v and all(isinstance(t, torch.Tensor) for t in v)
    ]
    scalar_list = any(
        isinstance(v, list | tuple) and v and not isinstance(v[0], torch.Tensor) for _, v in bound
    )
    fused = short.startswith("_fused_")
    if fused:  # the step counters travel beside the lists, not as one
        lists = [(n, v) for n, v in lists if n != "state_steps"]
    if not lists or not any(on_device(t) for t in lists[0][1]):
        return []
    first = lists[0][1]
    numels = [t.numel() for t in first]
    inplace = short.endswith("_")
    depth = len(lists) if (inplace or fused or short in NORMS) else len(lists) + 1
    depth = min(depth, 5)
    runs = launches(numels, depth, scalar_list=scalar_list, cuda_major=cuda_major)
    if not runs:
        return []
    writes = depth - 1 if fused else 1
    reads = depth if fused or inplace else depth - 1
    elements = sum(r.elements for r in runs)
    es = first[0].element_size()
    n = len(runs)
    dims = {
        "numel": round(elements / n),
        "tensors": max(1, round(sum(r.tensors for r in runs) / n)),
        "blocks": max(1, round(sum(r.blocks for r in runs) / n)),
        "depth": depth,
        "foreach": 1,
    }
    op = short.removeprefix("_foreach_").removeprefix("_fused_").removesuffix("_")
    name = f"aten.{short}"
    dtype = dtype_name(first[0].dtype)
    out = [
        Operator(
            "optimizer",
            phase,
            name,
            dims,
            dtype,
            op,
            elements * depth / n,
            (reads + writes) * elements * es / n,
            count=n,
        )
    ]
    if short in NORMS:  # one more kernel reduces the per-block partial results
        cleanup = {
            "numel": len(first),
            "tensors": len(first),
            "blocks": len(first),
            "depth": 1,
            "foreach": 1,
        }
        out.append(
            Operator(
                "optimizer",
                phase,
                name,
                cleanup,
                dtype,
                f"{op}_cleanup",
                float(len(first)),
                float(8 * len(first)),
            )
        )
    return out


def _bind(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(argument name, value)`` pairs of a call, by the op's schema."""
    names = [a.name for a in func._schema.arguments]
    pairs = list(zip(names, args, strict=False))
    return pairs + [(k, v) for k, v in kwargs.items()]


@contextmanager
def cuda_default_foreach(optimizer: Any) -> Iterator[str]:
    """Within: ``foreach=True`` in every param group that leaves ``foreach`` to PyTorch's
    default (None) and is not fused or differentiable, as on CUDA; restored after. Yields a
    one-line note on the implementation traced."""
    changed: list[dict[str, Any]] = []
    kinds: set[str] = set()
    for group in getattr(optimizer, "param_groups", []):
        if group.get("fused"):
            kinds.add("fused")
        elif "foreach" not in group:
            kinds.add("per-parameter (no foreach implementation)")
        elif group["foreach"] is None and not group.get("differentiable"):
            group["foreach"] = True
            changed.append(group)
            kinds.add("foreach (multi-tensor), CUDA's default")
        elif group["foreach"]:
            kinds.add("foreach (multi-tensor), as set")
        else:
            kinds.add("per-parameter (foreach=False as set)")
    try:
        yield f"optimizer {type(optimizer).__name__}: {', '.join(sorted(kinds)) or 'no groups'}"
    finally:
        for group in changed:
            group["foreach"] = None


def host_step_tensors(optimizer: Any) -> set[int]:
    """Ids of the 0-dim step counters PyTorch keeps on the host for a non-capturable,
    non-fused optimizer (they launch no GPU kernel on CUDA)."""
    import torch

    ids: set[int] = set()
    for group in getattr(optimizer, "param_groups", []):
        if group.get("capturable") or group.get("fused"):
            continue
        for p in group["params"]:
            step = optimizer.state.get(p, {}).get("step")
            if isinstance(step, torch.Tensor) and step.dim() == 0:
                ids.add(id(step))
    return ids


def state_bytes(optimizer: Any) -> int:
    """Bytes of the optimizer's state tensors (momenta, second moments, step counters)."""
    import torch

    return sum(
        v.numel() * v.element_size()
        for state in getattr(optimizer, "state", {}).values()
        for v in state.values()
        if isinstance(v, torch.Tensor)
    )
