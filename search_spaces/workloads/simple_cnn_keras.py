"""`simple-cnn` in Keras: the same network, data and recipe as ``simple_cnn`` (see its
docstring); channels-last digits (28, 28, 1), Keras' Adadelta (rho 0.95) at lr 1.0."""

from __future__ import annotations

from functools import partial
from typing import Any

from advisor.search_spaces.workloads.simple_cnn import CLASSES, SIDE, build


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


build_keras = partial(build, "keras", simple_cnn_keras)
