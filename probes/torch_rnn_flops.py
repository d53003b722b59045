"""FLOP formulas for the fused CPU LSTM kernels that torch's ``FlopCounterMode`` misses.

On CPU, ``nn.LSTM`` runs as one oneDNN op per layer (``aten.mkldnn_rnn_layer`` and its
backward), which ``FlopCounterMode`` has no formula for, so an LSTM's recurrent matrix
products would count as zero. Pass ``custom_mapping=rnn_flop_formulas()`` to
``FlopCounterMode`` to count them the way it counts ``mm``: 2 FLOPs per multiply-add.
A layer with input width ``I`` and hidden width ``H`` does ``T*B*4H*(I+H)`` multiply-adds
forward over ``T`` steps and ``B`` sequences; its backward twice that (input and weight
gradients). Keras' LSTM, unrolled, profiles to exactly the forward figure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _lstm_layer_forward(
    input_shape: Any, w_ih: Any, w_hh: Any, *args: Any, out_shape: Any = None, **kwargs: Any
) -> int:
    steps_times_batch = int(input_shape[0]) * int(input_shape[1])
    macs = steps_times_batch * (int(w_ih[0]) * int(w_ih[1]) + int(w_hh[0]) * int(w_hh[1]))
    return 2 * macs


def _lstm_layer_backward(
    input_shape: Any, w_ih: Any, w_hh: Any, *args: Any, out_shape: Any = None, **kwargs: Any
) -> int:
    return 2 * _lstm_layer_forward(input_shape, w_ih, w_hh)


def rnn_flop_formulas() -> dict[Any, Callable[..., int]]:
    """``{op: formula}`` for ``FlopCounterMode(custom_mapping=...)`` (imports torch)."""
    import torch

    aten = torch.ops.aten
    return {
        aten.mkldnn_rnn_layer: _lstm_layer_forward,
        aten.mkldnn_rnn_layer_backward: _lstm_layer_backward,
    }
