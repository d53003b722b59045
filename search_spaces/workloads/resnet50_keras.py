"""`resnet50` in Keras: ``keras.applications.ResNet50`` untrained (``weights=None``: nothing
is downloaded) at 32x32x3 with 10 classes; the same network as ``resnet50``."""

from __future__ import annotations

import time
from typing import Any

from advisor.search_spaces.workloads import _recipes
from advisor.search_spaces.workloads.resnet50 import CHANNELS, CLASSES, SIDE
from advisor.search_spaces.workloads.synthetic import class_images


def resnet50_keras(classes: int = CLASSES) -> Any:
    """ResNet-50 from ``keras.applications`` (logits out, random initial weights)."""
    import keras

    return keras.applications.ResNet50(
        weights=None,
        input_shape=(SIDE, SIDE, CHANNELS),
        classes=classes,
        classifier_activation=None,
    )


def build_keras(
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
    """Build the Keras resnet50 setup (``KerasSetup``) on generated CIFAR-10 shaped data.

    The learning rate follows a per-step cosine from ``lr`` to ``lr / 50`` over ``epochs``.
    """
    import keras
    from advisor.search_spaces.workloads.setups import KerasSetup

    keras.utils.set_random_seed(seed)
    start = time.perf_counter()
    train = class_images(n_train, SIDE, SIDE, CHANNELS, CLASSES, seed=seed)
    val = class_images(n_val, SIDE, SIDE, CHANNELS, CLASSES, seed=seed + 1)
    data_s = time.perf_counter() - start
    steps = max(1, int(epochs)) * max(1, -(-n_train // batch_size))
    schedule = keras.optimizers.schedules.CosineDecay(lr, decay_steps=steps, alpha=1 / 50)
    model = resnet50_keras()
    _recipes.keras_compile(
        model, _recipes.keras_optimizer(optimizer, lr, momentum, weight_decay, schedule)
    )
    return KerasSetup(
        model=model,
        train=train,
        val=val,
        batch_size=batch_size,
        data_s=data_s,
        data_samples=n_train + n_val,
    )
