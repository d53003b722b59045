"""`vgg-1` and `vgg-2` in Keras: the same networks as ``vgg`` (see its docstring)."""

from __future__ import annotations

import time
from typing import Any

from advisor.search_spaces.workloads import _recipes
from advisor.search_spaces.workloads.synthetic import class_images
from advisor.search_spaces.workloads.vgg import CHANNELS, CLASSES, VARIANTS


def vgg_keras(variant: str, dropout: float = 0.5) -> Any:
    """The ``variant`` network as a ``keras.Model`` (channels-last input, logits out)."""
    import keras
    from keras import layers

    side, filters, dense = VARIANTS[variant]
    inputs = keras.Input((side, side, CHANNELS))
    x = inputs
    for f in filters:
        x = layers.Conv2D(f, 3, padding="same", activation="relu")(x)
        x = layers.Conv2D(f, 3, padding="same", activation="relu")(x)
        x = layers.MaxPooling2D(2)(x)
    x = layers.Flatten()(x)
    x = layers.Dense(dense, activation="relu")(x)
    x = layers.Dropout(dropout)(x)
    outputs = layers.Dense(CLASSES)(x)
    return keras.Model(inputs, outputs, name=variant)


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
    import keras
    from advisor.search_spaces.workloads.setups import KerasSetup

    keras.utils.set_random_seed(seed)
    side = VARIANTS[variant][0]
    start = time.perf_counter()
    train = class_images(n_train, side, side, CHANNELS, CLASSES, seed=seed)
    val = class_images(n_val, side, side, CHANNELS, CLASSES, seed=seed + 1)
    data_s = time.perf_counter() - start
    model = vgg_keras(variant, dropout)
    _recipes.keras_compile(model, _recipes.keras_optimizer(optimizer, lr, momentum, weight_decay))
    return KerasSetup(
        model=model,
        train=train,
        val=val,
        batch_size=batch_size,
        data_s=data_s,
        data_samples=n_train + n_val,
    )


def build_vgg1_keras(
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
    """Build the Keras vgg-1 setup (``KerasSetup``) on generated CIFAR-10 shaped data."""
    return _build(
        "vgg-1", batch_size, n_train, n_val, seed, lr, momentum, weight_decay, dropout, optimizer
    )


def build_vgg2_keras(
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
    """Build the Keras vgg-2 setup (``KerasSetup``) on generated 64x64 CIFAR-10 data."""
    return _build(
        "vgg-2", batch_size, n_train, n_val, seed, lr, momentum, weight_decay, dropout, optimizer
    )
