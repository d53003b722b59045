"""`googlenet`: GoogLeNet (Inception v1) for binary chest X-ray classification (PyTorch).

Architecture (identical in ``googlenet_keras``), Szegedy et al. 2015 without the auxiliary
classifiers and local response normalisation: 7x7/2 convolution (64), 3x3/2 max-pool, 1x1
(64) and 3x3 (192) convolutions, 3x3/2 max-pool, inception 3a-3b, max-pool, inception 4a-4e,
max-pool, inception 5a-5b (nine inception blocks), global average pooling, dropout 0.4 and a
dense layer to 2 logits. Every convolution has a bias and is followed by ReLU; pools are
3x3/2 with 'same' padding (224 -> 112 -> 56 -> 28 -> 14 -> 7).

Data: generated 224x224x3 two-class images. Real sizes used for extrapolation: the published
chest X-ray pneumonia set (Kermany et al. 2018), 5,216 training and 624 test images.
Recipe: Adam, lr 1e-4, batch 16.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from advisor.search_spaces.workloads import _setup

SIDE = 224
CHANNELS = 3
CLASSES = 2
N_TRAIN = 5_216
N_VAL = 624
# name, 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection; "pool" = 3x3/2 max-pool
INCEPTION: tuple[tuple[str, int, int, int, int, int, int] | str, ...] = (
    ("3a", 64, 96, 128, 16, 32, 32),
    ("3b", 128, 128, 192, 32, 96, 64),
    "pool",
    ("4a", 192, 96, 208, 16, 48, 64),
    ("4b", 160, 112, 224, 24, 64, 64),
    ("4c", 128, 128, 256, 24, 64, 64),
    ("4d", 112, 144, 288, 32, 64, 64),
    ("4e", 256, 160, 320, 32, 128, 128),
    "pool",
    ("5a", 256, 160, 320, 32, 128, 128),
    ("5b", 384, 192, 384, 48, 128, 128),
)


def googlenet_torch(dropout: float = 0.4) -> Any:
    """GoogLeNet as a ``torch.nn.Module`` (logits out)."""
    import torch
    from torch import nn

    def conv(cin: int, cout: int, k: int, stride: int = 1) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2), nn.ReLU())

    class Inception(nn.Module):
        def __init__(self, cin: int, c1: int, r3: int, c3: int, r5: int, c5: int, pp: int):
            super().__init__()
            self.b1 = conv(cin, c1, 1)
            self.b3 = nn.Sequential(conv(cin, r3, 1), conv(r3, c3, 3))
            self.b5 = nn.Sequential(conv(cin, r5, 1), conv(r5, c5, 5))
            self.bp = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), conv(cin, pp, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], dim=1)

    layers: list[nn.Module] = [
        conv(CHANNELS, 64, 7, stride=2),
        nn.MaxPool2d(3, stride=2, padding=1),
        conv(64, 64, 1),
        conv(64, 192, 3),
        nn.MaxPool2d(3, stride=2, padding=1),
    ]
    cin = 192
    for spec in INCEPTION:
        if isinstance(spec, str):  # "pool"
            layers.append(nn.MaxPool2d(3, stride=2, padding=1))
            continue
        _, c1, r3, c3, r5, c5, pp = spec
        layers.append(Inception(cin, c1, r3, c3, r5, c5, pp))
        cin = c1 + c3 + c5 + pp
    layers += [
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(dropout),
        nn.Linear(cin, CLASSES),
    ]
    return nn.Sequential(*layers)


def build(
    framework: str,
    network: Callable[..., Any],
    batch_size: int = 16,
    n_train: int = N_TRAIN,
    n_val: int = N_VAL,
    seed: int = 0,
    lr: float = 1e-4,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    dropout: float = 0.4,
    optimizer: str = "adam",
    **_ignored: Any,
) -> Any:
    """Build the googlenet setup in ``framework`` (``TorchSetup`` or ``KerasSetup``)
    around ``network`` (the network in that framework) on
    generated 224x224 images."""
    recipe = _setup.Recipe(batch_size, seed, optimizer, lr, momentum, weight_decay)
    data = _setup.class_images(framework, n_train, n_val, SIDE, CHANNELS, CLASSES, seed)
    if framework == "keras":
        return recipe.keras(partial(network, dropout), data)
    return recipe.torch(partial(network, dropout), data, channels_last=True)


build_torch = partial(build, "torch", googlenet_torch)
