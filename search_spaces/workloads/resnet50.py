"""`resnet50`: ResNet-50 on CIFAR-10 shaped images, 32x32x3, 10 classes (PyTorch version).

The network is written out here because torchvision cannot be installed beside this torch;
it is layer for layer ``keras.applications.ResNet50(weights=None, input_shape=(32, 32, 3),
classes=10, classifier_activation=None)``, which ``resnet50_keras`` uses: ResNet v1 with
bottleneck blocks 3-4-6-3 (64-128-256-512 wide, 4x expansion), the stride in each stage's
first 1x1 convolution, biases on every convolution, batch norm (eps 1.001e-5) after each,
a projection shortcut at the start of each stage; a 7x7/2 stem with 3x3/2 max-pooling; global
average pooling and a dense layer to 10 logits. At 32x32 the stages run at 8, 4, 2 and 1
pixels square.

Recipe: momentum SGD, lr 0.1 decaying to 0.002 (cosine), momentum 0.9, weight decay 5e-4.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from advisor.search_spaces.workloads import _setup

SIDE = 32
CHANNELS = 3
CLASSES = 10
STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # width, blocks, stride
BN_EPS = 1.001e-5


def resnet50_torch(classes: int = CLASSES) -> Any:
    """ResNet-50 (Keras-applications layout) as a ``torch.nn.Module`` (logits out)."""
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, in_ch: int, width: int, stride: int, project: bool) -> None:
            super().__init__()
            out_ch = 4 * width
            self.body = nn.Sequential(
                nn.Conv2d(in_ch, width, 1, stride=stride),
                nn.BatchNorm2d(width, eps=BN_EPS),
                nn.ReLU(),
                nn.Conv2d(width, width, 3, padding=1),
                nn.BatchNorm2d(width, eps=BN_EPS),
                nn.ReLU(),
                nn.Conv2d(width, out_ch, 1),
                nn.BatchNorm2d(out_ch, eps=BN_EPS),
            )
            self.shortcut: nn.Module = (
                nn.Sequential(
                    nn.Conv2d(in_ch, out_ch, 1, stride=stride), nn.BatchNorm2d(out_ch, eps=BN_EPS)
                )
                if project
                else nn.Identity()
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.body(x) + self.shortcut(x))

    layers: list[nn.Module] = [
        nn.Conv2d(CHANNELS, 64, 7, stride=2, padding=3),
        nn.BatchNorm2d(64, eps=BN_EPS),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1),  # inputs are >= 0 after ReLU: same as zero pad
    ]
    in_ch = 64
    for width, blocks, stride in STAGES:
        for i in range(blocks):
            layers.append(Bottleneck(in_ch, width, stride if i == 0 else 1, project=i == 0))
            in_ch = 4 * width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(in_ch, classes)]
    return nn.Sequential(*layers)


def build(
    framework: str,
    network: Callable[..., Any],
    batch_size: int = 128,
    n_train: int = 50_000,
    n_val: int = 10_000,
    seed: int = 0,
    lr: float = 0.1,
    momentum: float = 0.9,
    weight_decay: float = 5e-4,
    optimizer: str = "momentum",
    epochs: int = 30,
    **_ignored: Any,
) -> Any:
    """Build the resnet50 setup in ``framework`` (``TorchSetup`` or ``KerasSetup``)
    around ``network`` (the network in that framework) on generated CIFAR-10 shaped data.

    The learning rate follows a cosine from ``lr`` to ``lr / 50`` over ``epochs``: per epoch
    in PyTorch, per step in Keras.
    """
    recipe = _setup.Recipe(batch_size, seed, optimizer, lr, momentum, weight_decay)
    data = _setup.class_images(framework, n_train, n_val, SIDE, CHANNELS, CLASSES, seed)
    if framework == "keras":
        import keras

        steps = max(1, int(epochs)) * max(1, -(-n_train // batch_size))
        schedule = keras.optimizers.schedules.CosineDecay(lr, decay_steps=steps, alpha=1 / 50)
        return recipe.keras(network, data, schedule=schedule)
    # Kept in NCHW: channels-last (_recipes.channels_last) measured slower for this network on
    # CPU (batch-8 step 141 ms against 126 ms, 2 threads); it has one max pool, at the stem.
    return recipe.torch(network, data, cosine_to=lr / 50, epochs=epochs)


build_torch = partial(build, "torch", resnet50_torch)
