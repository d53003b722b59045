"""`fcn`: a LeNet-style fully convolutional network finding diffraction apexes in seismic patches.

Input 64x64x1 synthetic seismic patches (:mod:`advisor.search_spaces.workloads.seismic`),
2 classes (apex at the centre or not). Layers, in order (channels-first shapes per sample;
"same" padding means output size = input size):

1. Conv 5x5, 1 -> 16 channels, stride 1, padding 2 ("same"), bias; ReLU      -> 16x64x64
2. MaxPool 2x2, stride 2                                                      -> 16x32x32
3. Conv 3x3, 16 -> 32, padding 1 ("same"), bias; ReLU                         -> 32x32x32
4. MaxPool 2x2                                                                -> 32x16x16
5. Conv 3x3, 32 -> 32, padding 1 ("same"), bias; ReLU                         -> 32x16x16
6. MaxPool 2x2                                                                -> 32x8x8
7. Dropout(p = ``dropout``, default 0.25)
8. Conv 8x8, 32 -> 64, no padding ("valid"), bias; ReLU  (the dense layer as a convolution) -> 64x1x1
9. Dropout(p = ``dropout``)
10. Conv 1x1, 64 -> 2, bias                                                   -> 2x1x1
11. Global average pooling, flatten                                           -> 2 logits

Being fully convolutional, it also runs on larger sections and then yields an apex heat map.
Forward FLOPs per sample (2 per multiply-add, as torch's FlopCounterMode counts):
2 x (64*64*16*25 + 32*32*32*16*9 + 16*16*32*32*9 + 32*8*8*64 + 64*2) = about 18.1 MFLOP.

Recipe (docs/method.md section 6): cross-entropy, momentum SGD (momentum 0.9), lr 0.1 decaying to 0.01 over
``epochs`` (cosine, stepped per epoch), weight decay 0; early stop after 5 epochs without gain
(``advisor.probes.torch_runner.train(..., patience=5)``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from advisor.search_spaces.workloads import _setup
from advisor.search_spaces.workloads.synthetic import to_channels_last

SIDE = 64
CLASSES = 2


def fcn_torch(dropout: float = 0.25) -> Any:
    """The FCN as a ``torch.nn.Module`` (logits out)."""
    from torch import nn

    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), but got {dropout}")
    return nn.Sequential(
        nn.Conv2d(1, 16, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Dropout(dropout),
        nn.Conv2d(32, 64, 8),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Conv2d(64, CLASSES, 1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )


def build(
    framework: str,
    network: Callable[..., Any],
    batch_size: int = 256,
    n_train: int = 40_512,
    n_val: int = 212,
    seed: int = 0,
    lr: float = 0.1,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    dropout: float = 0.25,
    optimizer: str = "momentum",
    epochs: int = 14,
    **_ignored: Any,
) -> Any:
    """Build the fcn setup in ``framework`` (``TorchSetup`` or ``KerasSetup``) around
    ``network`` (the network in that framework) on ``n_train``/``n_val`` generated patches."""
    from advisor.search_spaces.workloads.seismic import seismic_patches

    recipe = _setup.Recipe(batch_size, seed, optimizer, lr, momentum, weight_decay)
    if framework == "torch":
        seismic_patches(1)  # warm up numpy's code paths: a fixed cost, not a per-sample one
    data = _setup.generate(
        lambda: seismic_patches(n_train, SIDE, seed=seed),
        lambda: seismic_patches(n_val, SIDE, seed=seed + 1_000_003),
        x=to_channels_last if framework == "keras" else None,
    )
    model = partial(network, dropout)
    if framework == "keras":
        schedule = _setup.keras_cosine_per_epoch(lr, lr / 10, epochs)
        return recipe.keras(model, data, callbacks=(schedule,))
    return recipe.torch(model, data, channels_last=True, cosine_to=lr / 10, epochs=epochs)


build_torch = partial(build, "torch", fcn_torch)
