"""Where a CPU trace of a training step must take CUDA's path to hold what a GPU holds (issue
#45): dropout's fused kernel (a one-byte mask, where the CPU keeps a mask of the input's type)
and CUDA autocast's float32 list (ops the CPU's autocast would run in the half type).
Both are undone when the block ends."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

# CUDA autocast's float32 list that CPU autocast runs in the half type (PyTorch's "CUDA Ops
# that can autocast to float32", less those CPU autocast already keeps in float32).
CUDA_FLOAT32_OPS = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm",
    "group_norm", "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
    "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "softmax", "log_softmax", "cumprod", "cumsum", "prod", "sum", "norm",
)  # fmt: skip


@contextlib.contextmanager
def cuda_dropout() -> Iterator[None]:
    """Within: ``F.dropout`` (out of place, training) runs as ``native_dropout``, the fused
    kernel CUDA launches (a one-byte mask; the CPU takes a bernoulli path with a mask of the
    input's type). A patch of the function, not a mode, so that a checkpointed block's
    recomputation in backward takes the same path (a mode is not active there)."""
    import torch
    from advisor.probes.operators.torch_trace import fused_dropout

    functional = torch.nn.functional
    plain = functional.dropout

    def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
        fused = fused_dropout(False, input, p, training, inplace)
        return plain(input, p, training, inplace) if fused is None else fused

    functional.dropout = dropout
    try:
        yield
    finally:
        functional.dropout = plain


@contextlib.contextmanager
def cuda_autocast_lists() -> Iterator[None]:
    """Within: CPU autocast keeps in float32 the ops CUDA's autocast keeps there
    (``CUDA_FLOAT32_OPS``); unregistered after."""
    import torch

    lib = torch.library.Library("aten", "FRAGMENT")
    try:
        _register_float32(lib)
        yield
    finally:
        lib._destroy()  # the registrations go with the library fragment


def _register_float32(lib: Any) -> None:
    """Every overload of ``CUDA_FLOAT32_OPS`` that CPU autocast lets through (no AutocastCPU
    kernel of its own) cast to float32 under CPU autocast, as ``torch.library.register_autocast``
    does for custom ops (which cannot take an aten op with keyword arguments)."""
    import torch
    from torch.utils._pytree import tree_map

    key = torch._C.DispatchKey.AutocastCPU
    excluded = torch._C.DispatchKeySet(key)

    def up(t: Any) -> Any:
        wide = isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64
        return t.to(torch.float32) if wide else t

    for name in CUDA_FLOAT32_OPS:
        packet = getattr(torch.ops.aten, name, None)
        for overload in packet.overloads() if packet is not None else ():
            op = getattr(packet, overload)
            try:
                if op.has_kernel_for_dispatch_key(key):
                    continue  # CPU autocast's own rule (its float32 list, say)
            except RuntimeError:  # an overload the dispatcher does not hold (TorchScript's)
                continue

            def kernel(_keys: Any, *args: Any, _op: Any = op, **kwargs: Any) -> Any:
                with torch._C._ExcludeDispatchKeyGuard(excluded):
                    return _op(*tree_map(up, args), **tree_map(up, kwargs))

            lib.impl(op._schema.name.split("::")[1] + ("" if overload == "default" else f".{overload}"),
                     kernel, "AutocastCPU", with_keyset=True)  # fmt: skip
