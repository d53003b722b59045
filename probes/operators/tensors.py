"""Tensor sizes and memory traffic of an op's arguments, shared by the op mappers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def tensors_of(tree: Any) -> list[Any]:
    """The tensors in a nested structure of arguments or results."""
    import torch
    from torch.utils._pytree import tree_leaves

    return [x for x in tree_leaves(tree) if isinstance(x, torch.Tensor)]


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def distinct_numel(t: Any) -> int:
    """Elements a kernel reads from ``t``: a broadcast (stride-0) dimension counts once."""
    if t.numel() == 0:
        return 0
    repeated = math.prod(s for s, st in zip(t.shape, t.stride(), strict=True) if st == 0)
    return t.numel() // max(1, repeated)


def nbytes(t: Any, distinct: bool = True) -> int:
    return (distinct_numel(t) if distinct else t.numel()) * t.element_size()


def traffic(reads: Sequence[Any], writes: Sequence[Any]) -> float:
    """Bytes of every distinct tensor in ``reads`` read once plus ``writes`` written once."""
    seen: set[int] = set()
    total = 0
    for t in reads:
        if id(t) not in seen:
            seen.add(id(t))
            total += nbytes(t)
    return float(total + sum(t.numel() * t.element_size() for t in writes))
