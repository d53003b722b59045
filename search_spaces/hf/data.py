"""Synthetic token data, the loss and the logits-only wrapper of an ``hf:`` workload."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset


class RandomTokens(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """``n`` packed sequences of ``seq_len`` random token ids, drawn when read (seeded by the
    index); targets are the next tokens."""

    def __init__(self, n: int, seq_len: int, vocab: int, seed: int) -> None:
        if n <= 0 or seq_len <= 0 or vocab <= 1:
            raise ValueError(f"need n, seq_len > 0 and vocab > 1, got {n}, {seq_len}, {vocab}")
        self.n, self.seq_len, self.vocab, self.seed = n, seq_len, vocab, seed

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + int(i))
        ids = torch.randint(self.vocab, (self.seq_len + 1,), generator=g)
        return ids[:-1], ids[1:]


class CausalLM(nn.Module):
    """A transformers causal LM (or its peft wrapper) returning the logits only, so that the
    step's ``loss_fn(model(x), y)`` applies. ``inner`` is the wrapped model. A model with a
    bfloat16 base (LoRA, QLoRA, frozen blocks) computes under bfloat16 autocast when the plan
    sets none (an fp32 plan: its master weights and optimizer stay float32)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        _meta_is_tracing()
        self.half_base = any(p.dtype == torch.bfloat16 for p in inner.parameters())

    def forward(self, ids: torch.Tensor) -> Any:
        kind = ids.device.type
        own = self.half_base and kind in ("cpu", "cuda") and not torch.is_autocast_enabled(kind)
        cast = torch.autocast(kind, dtype=torch.bfloat16) if own else contextlib.nullcontext()
        with cast:
            return self.inner(input_ids=ids, use_cache=False).logits


class TokenLoss:
    """Cross-entropy of (B, T, V) logits against (B, T) targets, in float32 (as transformers'
    own causal-LM loss upcasts the logits)."""

    def __call__(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1)
        )


def _meta_is_tracing() -> None:
    """transformers' mask code reads values (``.all()`` on the positions, to skip the mask of a
    plain causal batch) unless it is tracing, which it detects for fake tensors, not for meta
    ones: meta tensors are counted as tracing too (the mask is then built, as under fake
    tensors; a B x T x T boolean)."""
    from transformers import masking_utils

    found = masking_utils.is_tracing
    if getattr(found, "counts_meta", False):
        return

    def is_tracing(tensor: Any = None) -> bool:
        return bool(found(tensor)) or (isinstance(tensor, torch.Tensor) and tensor.is_meta)

    is_tracing.__dict__["counts_meta"] = True
    masking_utils.is_tracing = is_tracing
