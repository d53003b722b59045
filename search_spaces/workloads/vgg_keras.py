"""`vgg-1` and `vgg-2` in Keras: the same networks as ``vgg`` (see its docstring)."""

from __future__ import annotations

from functools import partial
from typing import Any

from advisor.search_spaces.workloads.vgg import CHANNELS, CLASSES, VARIANTS, build


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


build_vgg1_keras = partial(build, "keras", vgg_keras, "vgg-1")
build_vgg2_keras = partial(build, "keras", vgg_keras, "vgg-2")
