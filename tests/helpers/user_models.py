"""Example user models for `advisor probe --model user_models:build` (used by the tests).

A user builder gets ``batch_size``, ``n_train``, ``n_val`` (when the advisor sets them),
``seed`` and hyperparameters, and returns ``(model, loss_fn, optimizer, train_dataset,
val_dataset)`` or a ``TorchSetup``.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset


def _data(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = (x[:, 0] > 0).long()
    return TensorDataset(x, y)


def build(batch_size: int = 32, seed: int = 0, lr: float = 0.1, **_: Any) -> Any:
    """A tiny MLP on a linearly separable problem: 512 train / 128 validation samples."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    return model, nn.CrossEntropyLoss(), opt, _data(512, seed), _data(128, seed + 1)


def build_digits(batch_size: int = 32, seed: int = 0, lr: float = 0.1, **_: Any) -> Any:
    """The tiny MLP on a dataset of its own size, as sklearn's digits split 80/20: 1,437
    training and 360 validation samples (issue #50: too few for --tune at batch 512)."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    return model, nn.CrossEntropyLoss(), opt, _data(1437, seed), _data(360, seed + 1)


def build_pooling(
    batch_size: int = 32, seed: int = 0, channels_last: bool = False, **_: Any
) -> Any:
    """A small convnet with max pooling on 4x16x16 images, channels-first unless asked."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(512, 2)
    )
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 4, 16, 16, generator=g)
    data = TensorDataset(x, (x.mean(dim=(1, 2, 3)) > 0).long())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return model, nn.CrossEntropyLoss(), opt, data, data


class _NanLoss(nn.Module):
    def forward(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(out, target) * float("nan")


def build_nan(batch_size: int = 32, seed: int = 0, **_: Any) -> Any:
    """Same model, but the loss is NaN from the first step."""
    model, _, opt, train, val = build(batch_size, seed)
    return model, _NanLoss(), opt, train, val


def build_crash(**_: Any) -> Any:
    """A builder that kills its process abruptly (as a segfault in native code would)."""
    os._exit(3)


def build_slow(batch_size: int = 32, seed: int = 0, **_: Any) -> Any:
    """A builder that hangs when it builds for real (used with a tiny timeout); traced on the
    meta device (suggest's memory check before it probes) it returns at once."""
    if torch.empty(0).device.type != "meta":
        time.sleep(60)
    return build(batch_size, seed)


class _Fails(nn.Module):
    """A model whose forward pass raises what ``fail`` says (on the first training step)."""

    def __init__(self, fail: str) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 2)
        self.fail = fail

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fail == "allocation":  # a real allocation failure in PyTorch's CPU allocator
            torch.empty(2**60, dtype=torch.uint8)
        elif self.fail == "memory":
            raise MemoryError("no memory for the activations")
        elif self.fail == "value":
            raise ValueError("shapes do not match (in user code)")
        return self.linear(x)


def build_failing(batch_size: int = 32, seed: int = 0, fail: str = "value", **_: Any) -> Any:
    """A model that fails in its forward pass: ``fail`` = allocation, memory or value."""
    torch.manual_seed(seed)
    model = _Fails(fail)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, nn.CrossEntropyLoss(), opt, _data(512, seed), _data(128, seed + 1)


def build_sigkill(batch_size: int = 32, seed: int = 0, **_: Any) -> Any:
    """A builder whose process is killed by SIGKILL when it builds for real (as the
    out-of-memory killer does); traced on the meta device (the check before a probe) it
    builds (issue #50: else that trace, in the isolated worker, is where it is killed)."""
    if torch.empty(0).device.type != "meta":
        os.kill(os.getpid(), signal.SIGKILL)
    return build(batch_size, seed)
