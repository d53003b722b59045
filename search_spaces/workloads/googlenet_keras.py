"""`googlenet` in Keras: the same GoogLeNet as ``googlenet`` (see its docstring)."""

from __future__ import annotations

import time
from typing import Any

from advisor.search_spaces.workloads import _recipes
from advisor.search_spaces.workloads.googlenet import (
    CHANNELS,
    CLASSES,
    INCEPTION,
    N_TRAIN,
    N_VAL,
    SIDE,
)
from advisor.search_spaces.workloads.synthetic import class_images


def googlenet_keras(dropout: float = 0.4) -> Any:
    """GoogLeNet as a ``keras.Model`` (channels-last input, logits out)."""
    import keras
    from keras import layers

    def conv(x: Any, filters: int, k: int, stride: int = 1) -> Any:
        return layers.Conv2D(filters, k, strides=stride, padding="same", activation="relu")(x)

    def pool(x: Any, stride: int = 2) -> Any:
        return layers.MaxPooling2D(3, strides=stride, padding="same")(x)

    inputs = keras.Input((SIDE, SIDE, CHANNELS))
    x = pool(conv(inputs, 64, 7, stride=2))
    x = pool(conv(conv(x, 64, 1), 192, 3))
    for spec in INCEPTION:
        if isinstance(spec, str):  # "pool"
            x = pool(x)
            continue
        _, c1, r3, c3, r5, c5, pp = spec
        x = layers.Concatenate()(
            [
                conv(x, c1, 1),
                conv(conv(x, r3, 1), c3, 3),
                conv(conv(x, r5, 1), c5, 5),
                conv(pool(x, stride=1), pp, 1),
            ]
        )
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(dropout)(x)
    outputs = layers.Dense(CLASSES)(x)
    return keras.Model(inputs, outputs, name="googlenet")


def build_keras(
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
    """Build the Keras googlenet setup (``KerasSetup``) on generated 224x224 images."""
    import keras
    from advisor.search_spaces.workloads.setups import KerasSetup

    keras.utils.set_random_seed(seed)
    start = time.perf_counter()
    train = class_images(n_train, SIDE, SIDE, CHANNELS, CLASSES, seed=seed)
    val = class_images(n_val, SIDE, SIDE, CHANNELS, CLASSES, seed=seed + 1)
    data_s = time.perf_counter() - start
    model = googlenet_keras(dropout)
    _recipes.keras_compile(model, _recipes.keras_optimizer(optimizer, lr, momentum, weight_decay))
    return KerasSetup(
        model=model,
        train=train,
        val=val,
        batch_size=batch_size,
        data_s=data_s,
        data_samples=n_train + n_val,
    )
