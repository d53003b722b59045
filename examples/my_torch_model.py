"""Your own PyTorch model for the advisor: `advisor probe --model examples.my_torch_model:build`.

A builder takes the batch size, the dataset sizes the advisor asks for (``n_train``, ``n_val``;
None means "your own"), a seed and hyperparameters as keyword arguments, and returns
``(model, loss_fn, optimizer, train_dataset, val_dataset)``. Datasets are
``torch.utils.data.Dataset`` objects yielding ``(input, target)``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset


def _blobs(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    x = torch.randn(n, 32, generator=g) + 2.0 * nn.functional.one_hot(y, 32).float()
    return TensorDataset(x, y)


def build(
    batch_size: int = 64,
    n_train: int | None = None,
    n_val: int | None = None,
    seed: int = 0,
    lr: float = 0.05,
    **_: Any,
) -> Any:
    """A small MLP on 4 Gaussian blobs in 32 dimensions (20,000 / 2,000 samples by default)."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 4)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    train = _blobs(n_train or 20_000, seed)
    val = _blobs(n_val or 2_000, seed + 1)
    return model, nn.CrossEntropyLoss(), optimizer, train, val
