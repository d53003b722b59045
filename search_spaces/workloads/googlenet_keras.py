"""`googlenet` in Keras: the same GoogLeNet as ``googlenet`` (see its docstring)."""

from __future__ import annotations

from functools import partial
from typing import Any

from advisor.search_spaces.workloads.googlenet import CHANNELS, CLASSES, INCEPTION, SIDE, build


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


build_keras = partial(build, "keras", googlenet_keras)
