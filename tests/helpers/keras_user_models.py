"""Example user Keras models for the probe tests (``keras_user_models:build_binary``).

A Keras builder gets ``batch_size``, ``seed`` and hyperparameters and returns a
``KerasSetup`` with a compiled model. Keras and numpy are imported inside the builder.
"""

from __future__ import annotations

from typing import Any


def build_binary(batch_size: int = 32, seed: int = 0, **_: Any) -> Any:
    """A plain binary classifier as users write it: Embedding -> LSTM -> Dense(1, sigmoid),
    ``binary_crossentropy`` by name, 1-D float labels (shape ``(N,)``, the output is
    ``(N, 1)``): ``fit`` reshapes the labels, a bare loss call does not. 512 training and 64
    validation sequences of 12 tokens from a 50-token vocabulary; the label says whether the
    first token is in the upper half."""
    import keras
    import numpy as np
    from advisor.search_spaces.workloads import KerasSetup

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 50, size=(576, 12)).astype("int64")
    y = (x[:, 0] >= 25).astype("float32")
    model = keras.Sequential(
        [
            keras.Input((12,), dtype="int64"),
            keras.layers.Embedding(50, 8),
            keras.layers.LSTM(8),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    return KerasSetup(
        model=model, train=(x[:512], y[:512]), val=(x[512:], y[512:]), batch_size=batch_size
    )
