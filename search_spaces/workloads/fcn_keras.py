"""`fcn` in Keras: the same network, data and recipe as ``fcn`` (see its docstring).

Channels-last: patches are (64, 64, 1). The learning rate follows the same per-epoch cosine
from ``lr`` to ``lr / 10`` (a ``LearningRateScheduler`` callback); early stopping after 5
epochs without gain is ``advisor.probes.keras_runner.train(..., patience=5)``, as in PyTorch.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from advisor.search_spaces.workloads.fcn import CLASSES, SIDE, build


def fcn_keras(dropout: float = 0.25) -> Any:
    """The FCN as a ``keras.Model`` (channels-last input, logits out)."""
    import keras
    from keras import layers

    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), but got {dropout}")
    inputs = keras.Input((SIDE, SIDE, 1))
    x = layers.Conv2D(16, 5, padding="same", activation="relu")(inputs)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Dropout(dropout)(x)
    x = layers.Conv2D(64, 8, activation="relu")(x)
    x = layers.Dropout(dropout)(x)
    x = layers.Conv2D(CLASSES, 1)(x)
    outputs = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, outputs, name="fcn")


build_keras = partial(build, "keras", fcn_keras)
