"""`simple-cnn`: the classic Keras MNIST convnet on 28x28x1 digits, 10 classes.

Data: :mod:`advisor.search_spaces.workloads.digits` (scikit-learn's real 8x8 digits resized
to 28x28 with random sizes, shifts and noise). Layers, in order (channels-first per sample):

1. Conv 3x3, 1 -> 32 channels, no padding ("valid"), bias; ReLU   -> 32x26x26
2. Conv 3x3, 32 -> 64, "valid", bias; ReLU                        -> 64x24x24
3. MaxPool 2x2, stride 2                                          -> 64x12x12
4. Dropout(p = ``dropout``, default 0.25)
5. Flatten (channels-first order in torch; Keras flattens channels-last: same count)  -> 9216
6. Dense 9216 -> 128, bias; ReLU
7. Dropout(p = 2 x ``dropout``, default 0.5)
8. Dense 128 -> 10, bias                                          -> 10 logits

Forward FLOPs per sample (2 per multiply-add): 2 x (26*26*32*9 + 24*24*64*32*9 + 9216*128 +
128*10) = about 23.9 MFLOP. Recipe: cross-entropy, Adadelta with lr 1.0 (rho 0.9, as the
PyTorch MNIST example; Keras' Adadelta uses rho 0.95).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from advisor.search_spaces.workloads import _setup
from advisor.search_spaces.workloads.synthetic import to_channels_last

SIDE = 28
CLASSES = 10


def simple_cnn_torch(dropout: float = 0.25) -> Any:
    """The network as a ``torch.nn.Module`` (logits out)."""
    from torch import nn

    if not 0.0 <= dropout < 0.5:
        raise ValueError(f"dropout must be in [0, 0.5) (the head uses 2x), but got {dropout}")
    return nn.Sequential(
        nn.Conv2d(1, 32, 3),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Dropout(dropout),
        nn.Flatten(),
        nn.Linear(64 * 12 * 12, 128),
        nn.ReLU(),
        nn.Dropout(2 * dropout),
        nn.Linear(128, CLASSES),
    )


def build(
    framework: str,
    network: Callable[..., Any],
    batch_size: int = 256,
    n_train: int = 60_000,
    n_val: int = 10_000,
    seed: int = 0,
    lr: float = 1.0,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    dropout: float = 0.25,
    optimizer: str = "adadelta",
    **_ignored: Any,
) -> Any:
    """Build the simple-cnn setup in ``framework`` (``TorchSetup`` or ``KerasSetup``)
    around ``network`` (the network in that framework) on
    ``n_train``/``n_val`` digits."""
    from advisor.search_spaces.workloads.digits import digit_images

    recipe = _setup.Recipe(batch_size, seed, optimizer, lr, momentum, weight_decay)
    if framework == "torch":
        digit_images(1)  # load the source images once: a fixed cost, not a per-sample one
    data = _setup.generate(
        lambda: digit_images(n_train, seed=seed, subset="train"),
        lambda: digit_images(n_val, seed=seed + 1_000_003, subset="val"),
        x=to_channels_last if framework == "keras" else None,
    )
    if framework == "keras":
        return recipe.keras(partial(network, dropout), data)
    return recipe.torch(partial(network, dropout), data, channels_last=True)


build_torch = partial(build, "torch", simple_cnn_torch)
