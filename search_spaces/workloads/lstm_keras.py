"""`lstm` in Keras: the same language model as ``lstm`` (see its docstring)."""

from __future__ import annotations

import time
from typing import Any

from advisor.search_spaces.workloads import _recipes
from advisor.search_spaces.workloads.lstm import N_TRAIN, N_VAL, SEQ_LEN, VOCAB
from advisor.search_spaces.workloads.synthetic import zipf_tokens


def lstm_keras(hidden: int = 200, dropout: float = 0.0) -> Any:
    """The language model as a ``keras.Model``: (B, 35) tokens to (B, 35, V) logits."""
    import keras
    from keras import layers

    tokens = keras.Input((SEQ_LEN,), dtype="int32")
    x = layers.Embedding(VOCAB, hidden)(tokens)
    x = layers.LSTM(hidden, return_sequences=True)(x)
    x = layers.Dropout(dropout)(x)
    x = layers.LSTM(hidden, return_sequences=True)(x)
    x = layers.Dropout(dropout)(x)
    logits = layers.Dense(VOCAB)(x)
    return keras.Model(tokens, logits, name="lstm")


def build_keras(
    batch_size: int = 20,
    n_train: int = N_TRAIN,
    n_val: int = N_VAL,
    seed: int = 0,
    lr: float = 1e-3,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    dropout: float = 0.0,
    optimizer: str = "adam",
    hidden: int = 200,
    **_ignored: Any,
) -> Any:
    """Build the Keras lstm setup (``KerasSetup``) on generated Zipfian token sequences."""
    import keras
    from advisor.search_spaces.workloads.setups import KerasSetup

    keras.utils.set_random_seed(seed)
    start = time.perf_counter()
    x, y = zipf_tokens(n_train, SEQ_LEN, VOCAB, seed=seed)
    vx, vy = zipf_tokens(n_val, SEQ_LEN, VOCAB, seed=seed + 1)
    data_s = time.perf_counter() - start
    model = lstm_keras(int(hidden), dropout)
    _recipes.keras_compile(model, _recipes.keras_optimizer(optimizer, lr, momentum, weight_decay))
    return KerasSetup(
        model=model,
        train=(x.astype("int32"), y.astype("int32")),
        val=(vx.astype("int32"), vy.astype("int32")),
        batch_size=batch_size,
        data_s=data_s,
        data_samples=n_train + n_val,
    )
