"""`lstm` in Keras: the same language model as ``lstm`` (see its docstring)."""

from __future__ import annotations

from functools import partial
from typing import Any

from advisor.search_spaces.workloads.lstm import SEQ_LEN, VOCAB, build


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


build_keras = partial(build, "keras", lstm_keras)
