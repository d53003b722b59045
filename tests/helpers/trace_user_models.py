"""User builders for the operator-trace tests (``trace_user_models:build_data_dependent``)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset


class _Gated(nn.Module):
    """Control flow on a tensor's value: no meta-device trace can decide the branch."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 4), nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x) if float(x.sum()) > 0 else self.b(x)


def build_data_dependent(batch_size: int = 16, seed: int = 0, **_: Any) -> Any:
    """A model whose forward branches on its input's values; 64 / 16 samples."""
    torch.manual_seed(seed)
    model = _Gated()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(80, 8), torch.randint(0, 4, (80,))
    return _setup(model, opt, x, y)


def build_huge_linear(batch_size: int = 8, seed: int = 0, **_: Any) -> Any:
    """Eight ``nn.Linear(65536, 65536)`` layers: 128 GiB of fp32 weights, far beyond this
    machine (and any GPU), with a small dataset (64 / 16 samples of 65536 features) made on
    the default device, as a user would write it."""
    torch.manual_seed(seed)
    model = nn.Sequential(*(nn.Linear(65536, 65536) for _ in range(8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(80, 65536), torch.randint(0, 65536, (80,))
    return _setup(model, opt, x, y)


def build_wide_linear(batch_size: int = 8, seed: int = 0, **_: Any) -> Any:
    """Four ``nn.Linear(32768, 32768)`` layers: 16 GiB of fp32 weights, as much again in
    gradients -- more than a 16 or 24 GB GPU holds, less than an 80 GB one -- with a small real
    dataset (64 / 16 samples) built on the CPU whatever the default device is."""
    torch.manual_seed(seed)
    model = nn.Sequential(*(nn.Linear(32768, 32768) for _ in range(4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(80, 32768, generator=g, device="cpu")
    y = torch.randint(0, 32768, (80,), generator=g, device="cpu")
    return _setup(model, opt, x, y)


def _setup(model: Any, opt: Any, x: Any, y: Any) -> Any:
    """The builder's tuple: the first 64 samples train, the other 16 validate."""
    return (
        model,
        nn.CrossEntropyLoss(),
        opt,
        TensorDataset(x[:64], y[:64]),
        TensorDataset(x[64:], y[64:]),
    )


def deep_mini(layers: int | None = None, **kwargs: Any) -> Any:
    """GPT-2's blocks, 8 of them at width 128 (sequences of 64), declaring its depth
    (``blocks``) so that its plan memory is carried from traces of 4 and 6 blocks."""
    from examples.transformers import build_language_model, load_config

    config = {**load_config("gpt2_large"), "n_layer": 8, "n_embd": 128, "n_head": 4,
              "n_positions": 64, "n_ctx": 64, "vocab_size": 4096}  # fmt: skip
    return build_language_model(config, layers=layers, **kwargs)


deep_mini.blocks = 8  # type: ignore[attr-defined]
