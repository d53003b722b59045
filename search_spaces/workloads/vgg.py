"""`vgg-1` and `vgg-2`: small VGG-style stacks on CIFAR-10 shaped images (PyTorch version).

Architecture (identical in ``vgg_keras``): blocks of two 3x3 'same' convolutions with ReLU,
then 2x2 max-pooling; flatten; dense + ReLU; dropout; dense to 10 logits.

- vgg-1: 32x32x3 input, blocks of 32 and 64 filters -> 8x8x64, dense 128.
- vgg-2: 64x64x3 input, blocks of 32, 64, 128 and 256 filters -> 4x4x256, dense 256.

Recipe: momentum SGD (lr 0.01, momentum 0.9), batch 128, 10 epochs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from advisor.search_spaces.workloads import _setup

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


def build(
    framework: str,
    network: Callable[..., Any],
    variant: str,
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
    """Build the ``variant`` setup in ``framework`` (``TorchSetup`` or ``KerasSetup``)
    around ``network`` (the network in that framework) on
    generated CIFAR-10 shaped data (64x64 for vgg-2)."""
    recipe = _setup.Recipe(batch_size, seed, optimizer, lr, momentum, weight_decay)
    side = VARIANTS[variant][0]
    data = _setup.class_images(framework, n_train, n_val, side, CHANNELS, CLASSES, seed)
    if framework == "keras":
        return recipe.keras(partial(network, variant, dropout), data)
    return recipe.torch(partial(network, variant, dropout), data, channels_last=True)


build_vgg1_torch = partial(build, "torch", vgg_torch, "vgg-1")
build_vgg2_torch = partial(build, "torch", vgg_torch, "vgg-2")
