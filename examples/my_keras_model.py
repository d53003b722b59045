"""Your own Keras model for the advisor:
`advisor probe --framework keras --model examples.my_keras_model:build`.

A builder takes the same keyword arguments as a PyTorch one and returns an
``advisor.search_spaces.workloads.KerasSetup``: a compiled ``keras.Model`` and ``(x, y)`` arrays
(or batched ``tf.data.Dataset`` objects) for training and validation.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _blobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    x = rng.standard_normal((n, 32)).astype("float32")
    x[np.arange(n), y] += 2.0
    return x, y


def build(
    batch_size: int = 64,
    n_train: int | None = None,
    n_val: int | None = None,
    seed: int = 0,
    lr: float = 0.05,
    **_: Any,
) -> Any:
    """The same MLP and data as ``examples/my_torch_model.py``, in Keras."""
    import keras
    from advisor.search_spaces.workloads import KerasSetup

    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((32,)),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(4),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=lr, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    train = _blobs(n_train or 20_000, seed)
    val = _blobs(n_val or 2_000, seed + 1)
    return KerasSetup(model=model, train=train, val=val, batch_size=batch_size)
