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


class _NeverRun:
    """Stands in for a compiled ``keras.Model`` where nothing runs it: the untimed path reads
    the builder's declared sizes and traces the step separately (``build_declared``)."""

    compiled = True

    def fit(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("this stand-in model is never trained")


def build_declared(batch_size: int = 32, seed: int = 0, **_: Any) -> Any:
    """A Keras builder that hands over a 256-sequence sample of its data and declares the
    full dataset's sizes (``n_train`` 25,000, ``n_val`` 5,000), as a user with a large dataset
    writes it; its model is a stand-in (no TensorFlow needed where it is never run)."""
    import numpy as np
    from advisor.search_spaces.workloads import KerasSetup

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 50, size=(320, 12)).astype("int64")
    y = (x[:, 0] >= 25).astype("float32")
    return KerasSetup(
        model=_NeverRun(), train=(x[:256], y[:256]), val=(x[256:], y[256:]),
        batch_size=batch_size, n_train=25_000, n_val=5_000,
    )  # fmt: skip
