"""Scaled dot-product attention on the meta device as CUDA runs it (issue #48).

``F.scaled_dot_product_attention`` picks its kernel by device. CUDA takes a fused kernel --
FlashAttention for half types without a mask, else the memory-efficient kernel (PyTorch's
``sdp_utils``: flash, then efficient, then the math fallback) -- which never writes the
attention scores to memory. The meta device has no fused kernel and takes the math path:
the causal mask built and added, a float32 softmax over the whole score matrix, two batched
products per pass. At Llama 3.1 8B's 4,096 tokens that path priced on a GPU was more than
half the step's predicted time (the mask's addition alone 17 billion elements per step).

:func:`fused_attention` calls the fused kernel CUDA would take, on meta tensors, with its
autograd formula (so the backward pass is the fused kernel's backward too). The trace then
records it as ``aten_ops`` maps every fused attention kernel: FlashAttention-2's products
(``aten_products.sdpa``), without the mask, the copies or a score matrix in memory.
"""

from __future__ import annotations

from typing import Any

_NAMES = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


def fused_attention(*args: Any, **kwargs: Any) -> Any:
    """``F.scaled_dot_product_attention(*args, **kwargs)`` through the kernel CUDA takes,
    where the inputs are meta tensors; None otherwise (the caller runs it as it is)."""
    import torch

    bound = {**dict(zip(_NAMES, args, strict=False)), **kwargs}
    q, k, v = bound["query"], bound["key"], bound["value"]
    if not all(isinstance(t, torch.Tensor) and t.is_meta and t.dim() == 4 for t in (q, k, v)):
        return None
    if k.shape[-3] != q.shape[-3]:  # grouped-query attention: each key-value head repeated
        if not bound.get("enable_gqa") or q.shape[-3] % k.shape[-3]:
            return None
        groups = q.shape[-3] // k.shape[-3]
        k, v = (t.repeat_interleave(groups, dim=-3) for t in (k, v))
    mask = bound.get("attn_mask")
    dropout = float(bound.get("dropout_p", 0.0))
    causal = bool(bound.get("is_causal", False))
    scale = bound.get("scale")
    half = q.dtype in (torch.float16, torch.bfloat16)
    if mask is None and half:
        return torch.ops.aten._scaled_dot_product_flash_attention(
            q, k, v, dropout, causal, False, scale=scale
        )[0]
    bias = None
    if mask is not None:
        if mask.dtype == torch.bool:  # True: attend (an additive bias of 0, else -inf)
            bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device)
        else:
            bias = mask.to(q.dtype)
        bias = bias.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    needs_grad = any(t.requires_grad for t in (q, k, v))
    return torch.ops.aten._scaled_dot_product_efficient_attention(
        q, k, v, bias, needs_grad, dropout, causal, scale=scale
    )[0]
