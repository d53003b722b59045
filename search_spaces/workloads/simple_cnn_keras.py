"""`simple-cnn` in Keras: the same network, data and recipe as ``simple_cnn`` (see its
docstring); channels-last digits (28, 28, 1), Keras' Adadelta (rho 0.95) at lr 1.0."""

from __future__ import annotations

import time
from typing import Any

from advisor.search_spaces.workloads import _recipes
from advisor.search_spaces.workloads.simple_cnn import CLASSES, SIDE
from advisor.search_spaces.workloads.synthetic import to_channels_last


def simple_cnn_keras(dropout: float = 0.25) -> Any:
    """The network as a ``keras.Model`` (channels-last input, logits out)."""
    import keras
    from keras import layers

    if not 0.0 <= dropout < 0.5:
        raise ValueError(f"dropout must be in [0, 0.5) (the head uses 2x), but got {dropout}")
    inputs = keras.Input((SIDE, SIDE, 1))
    x = layers.Conv2D(32, 3, activation="relu")(inputs)
    x = layers.Conv2D(64, 3, activation="relu")(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Dropout(dropout)(x)
    x = layers.Flatten()(x)
    x = layers.Dense(128, activation="relu")(x)
    x = layers.Dropout(2 * dropout)(x)
    outputs = layers.Dense(CLASSES)(x)
    return keras.Model(inputs, outputs, name="simple_cnn")


def build_keras(
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
    """Build the Keras simple-cnn setup (``KerasSetup``) on ``n_train``/``n_val`` digits."""
    import keras
    from advisor.search_spaces.workloads.digits import digit_images
    from advisor.search_spaces.workloads.setups import KerasSetup

    keras.utils.set_random_seed(seed)
    start = time.perf_counter()
    x, y = digit_images(n_train, seed=seed, subset="train")
    vx, vy = digit_images(n_val, seed=seed + 1_000_003, subset="val")
    x, vx = to_channels_last(x), to_channels_last(vx)
    data_s = time.perf_counter() - start
    model = simple_cnn_keras(dropout)
    _recipes.keras_compile(model, _recipes.keras_optimizer(optimizer, lr, momentum, weight_decay))
    return KerasSetup(
        model=model,
        train=(x, y),
        val=(vx, vy),
        batch_size=batch_size,
        data_s=data_s,
        data_samples=n_train + n_val,
    )
