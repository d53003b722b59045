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

import time
from typing import Any

from advisor.search_spaces.workloads import _recipes

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


def build_torch(
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
    """Build the PyTorch simple-cnn setup (``TorchSetup``) on ``n_train``/``n_val`` digits."""
    import torch
    from advisor.search_spaces.workloads.digits import digit_images
    from advisor.search_spaces.workloads.setups import TorchSetup
    from torch import nn

    torch.manual_seed(seed)
    digit_images(1)  # load the source images once: a fixed cost, not a per-sample one
    start = time.perf_counter()
    train = digit_images(n_train, seed=seed, subset="train")
    val = digit_images(n_val, seed=seed + 1_000_003, subset="val")
    data_s = time.perf_counter() - start
    train_loader, val_loader = _recipes.torch_loaders(train, val, batch_size, seed)
    model = _recipes.channels_last(simple_cnn_torch(dropout))
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
