"""`vgg-1` and `vgg-2`: small VGG-style stacks on CIFAR-10 shaped images (PyTorch version).

Architecture (identical in ``vgg_keras``): blocks of two 3x3 'same' convolutions with ReLU,
then 2x2 max-pooling; flatten; dense + ReLU; dropout; dense to 10 logits.

- vgg-1: 32x32x3 input, blocks of 32 and 64 filters -> 8x8x64, dense 128.
- vgg-2: 64x64x3 input, blocks of 32, 64, 128 and 256 filters -> 4x4x256, dense 256.

Recipe: momentum SGD (lr 0.01, momentum 0.9), batch 128, 10 epochs.
"""

from __future__ import annotations

import time
from typing import Any

from advisor.search_spaces.workloads import _recipes
from advisor.search_spaces.workloads.synthetic import class_images, to_channels_first

# name -> (input side, filters per block, dense units)
VARIANTS: dict[str, tuple[int, tuple[int, ...], int]] = {
    "vgg-1": (32, (32, 64), 128),
    "vgg-2": (64, (32, 64, 128, 256), 256),
}
CHANNELS = 3
CLASSES = 10


def vgg_torch(variant: str, dropout: float = 0.5) -> Any:
    """The ``variant`` network as a ``torch.nn.Sequential`` (logits out)."""
    from torch import nn

    side, filters, dense = VARIANTS[variant]
    layers: list[Any] = []
    in_ch = CHANNELS
    for f in filters:
        layers += [nn.Conv2d(in_ch, f, 3, padding=1), nn.ReLU()]
        layers += [nn.Conv2d(f, f, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        in_ch = f
    out_side = side // 2 ** len(filters)
    layers += [
        nn.Flatten(),
        nn.Linear(in_ch * out_side * out_side, dense),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(dense, CLASSES),
    ]
    return nn.Sequential(*layers)


def _build(
    variant: str,
    batch_size: int,
    n_train: int,
    n_val: int,
    seed: int,
    lr: float,
    momentum: float,
    weight_decay: float,
    dropout: float,
    optimizer: str,
) -> Any:
    import torch
    from advisor.search_spaces.workloads.setups import TorchSetup
    from torch import nn

    torch.manual_seed(seed)
    side = VARIANTS[variant][0]
    start = time.perf_counter()
    x, y = class_images(n_train, side, side, CHANNELS, CLASSES, seed=seed)
    vx, vy = class_images(n_val, side, side, CHANNELS, CLASSES, seed=seed + 1)
    data_s = time.perf_counter() - start
    train_loader, val_loader = _recipes.torch_loaders(
        (to_channels_first(x), y), (to_channels_first(vx), vy), batch_size, seed
    )
    model = _recipes.channels_last(vgg_torch(variant, dropout))
    return TorchSetup(
        model=model,
        loss_fn=nn.CrossEntropyLoss(),
        optimizer=_recipes.torch_optimizer(
            model.parameters(), optimizer, lr, momentum, weight_decay
        ),
        train_loader=train_loader,
        val_loader=val_loader,
        data_s=data_s,
        data_samples=n_train + n_val,
    )


def build_vgg1_torch(
    batch_size: int = 128,
    n_train: int = 50_000,
    n_val: int = 10_000,
    seed: int = 0,
    lr: float = 0.01,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    dropout: float = 0.5,
    optimizer: str = "momentum",
    **_ignored: Any,
) -> Any:
    """Build the PyTorch vgg-1 setup (``TorchSetup``) on generated CIFAR-10 shaped data."""
    return _build(
        "vgg-1", batch_size, n_train, n_val, seed, lr, momentum, weight_decay, dropout, optimizer
    )


def build_vgg2_torch(
    batch_size: int = 128,
    n_train: int = 50_000,
    n_val: int = 10_000,
    seed: int = 0,
    lr: float = 0.01,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    dropout: float = 0.5,
    optimizer: str = "momentum",
    **_ignored: Any,
) -> Any:
    """Build the PyTorch vgg-2 setup (``TorchSetup``) on generated 64x64 CIFAR-10 data."""
    return _build(
        "vgg-2", batch_size, n_train, n_val, seed, lr, momentum, weight_decay, dropout, optimizer
    )
