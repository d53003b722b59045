"""The operator trace of a Keras model's training step, layer by layer (no step is run).

From each layer's input and output shapes at the batch size (a functional or sequential
model's layers, nested models flattened), the kernels a GPU runs for it, forward and backward:
Dense -> ``linear`` (+ bias add, activation), Conv1D/2D and DepthwiseConv2D -> ``conv``
(backward: data and weight gradients, bias reduction), LSTM/GRU/SimpleRNN -> cuDNN's
per-step products and gate kernels (:mod:`.recurrent`, shared with PyTorch), normalisation
-> ``layernorm`` / ``other`` (batch norm), activations and Dropout/Add/Multiply ->
``elementwise``, pooling -> ``other`` / ``reduction``, Concatenate/padding -> ``copy``,
Embedding -> ``embedding``; the loss (softmax cross-entropy, binary cross-entropy, squared
error) and the optimizer update.

Keras (TensorFlow back end) updates the variables one by one; ``UPDATE_KERNELS`` counts the
tensor-sized kernels of one variable's update in Keras 3.15's ``update_step``
(``keras/src/optimizers/<name>.py``: each ``ops.*`` call and assignment on a tensor is one
kernel without XLA; AdamW adds its decoupled decay, 3 kernels). XLA fusion, which Keras may
apply on a GPU (``jit_compile``), is not modelled: element-wise work is traced unfused.
Imports Keras when called.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from advisor.probes.operators.keras_layers import HANDLERS, Shape, elementwise, unknown
from advisor.probes.operators.recurrent import ELEMENT_BYTES
from advisor.probes.operators.types import Operator, OperatorTrace

UPDATE_KERNELS = {  # per variable, counted in keras/src/optimizers/*.py update_step (3.15)
    "SGD": 2,  # multiply, assign_sub
    "SGD+momentum": 5,  # 2 multiply, subtract, assign, assign_add
    "Adam": 12,
    "AdamW": 15,  # Adam + decay: multiply, subtract, assign
    "RMSprop": 10,
    "RMSprop+momentum": 12,
    "Adadelta": 19,
    "Adagrad": 7,
}


def trace_keras_workload(
    workload: str,
    batch_size: int,
    hyperparameters: dict[str, Any] | None = None,
    seed: int = 0,
    precision: str | None = None,
) -> OperatorTrace:
    """Build ``workload`` (built-in name or ``module:function``) with Keras and trace it;
    ``precision`` (bf16, fp16: issue #35) builds it under Keras's mixed-precision policy
    (``advisor.probes.keras_precision``), so its layers compute, and keep their outputs, in
    the half type."""
    from advisor.probes.keras_precision import build_under
    from advisor.search_spaces.workloads import ModelRef, get, load_callable

    hp = dict(hyperparameters or {})
    if ModelRef(workload).is_user:
        builder, sizes = load_callable(workload), {}
    else:
        builder, sizes = (
            get(workload).builder("keras"),
            {"n_train": batch_size, "n_val": batch_size},
        )
    setup = build_under(precision, builder, batch_size=batch_size, seed=seed, **sizes, **hp)
    return trace_keras_model(setup.model, batch_size, workload=workload)


def trace_keras_model(model: Any, batch_size: int, *, workload: str) -> OperatorTrace:
    """The operators of one training step of the compiled Keras ``model`` at ``batch_size``."""
    fwd: list[Operator] = []
    bwd: list[Operator] = []
    acts = widest = 0
    grads_flow = False  # whether an earlier layer has trainable weights
    dtype = "float32"
    for layer in _leaf_layers(model):
        ins, outs = _shapes(layer, "input", batch_size), _shapes(layer, "output", batch_size)
        dtype = str(getattr(layer, "compute_dtype", None) or dtype)
        handler = HANDLERS.get(type(layer).__name__, unknown)
        f, b = handler(layer, ins, outs, dtype, grads_flow)
        fwd.extend(f)
        bwd[:0] = b  # backward runs the layers in reverse
        es = ELEMENT_BYTES.get(dtype, 4)
        out_bytes = sum(math.prod(s) for s in outs) * es if f else 0
        acts, widest = acts + out_bytes, max(widest, out_bytes)
        grads_flow = grads_flow or bool(layer.trainable_weights)
    try:
        final = _shapes(model, "output", batch_size)
    except AttributeError:  # a Sequential model not called yet: its last layer's output
        final = outs
    loss_f, loss_b = _loss(model, final, dtype)
    weights = model.trainable_weights
    params = int(sum(math.prod(w.shape) for w in weights))
    if not getattr(model.optimizer, "built", True):
        model.optimizer.build(weights)  # what fit does first: creates the state variables
    opt = _optimizer(model.optimizer, weights, dtype)
    state = sum(
        math.prod(v.shape) * ELEMENT_BYTES.get(str(v.dtype), 4)
        for v in getattr(model.optimizer, "variables", [])
    )
    from advisor.probes.operators.torch_trace import merge

    def nbytes(variables: Any) -> int:
        """In the variables' own dtype: float32 under a mixed policy (the master weights)."""
        return int(sum(math.prod(v.shape) * ELEMENT_BYTES.get(str(v.dtype), 4) for v in variables))

    return OperatorTrace(
        workload=workload,
        framework="keras",
        batch_size=batch_size,
        operators=merge([*fwd, *loss_f, *loss_b, *bwd, *opt]),
        executed=False,
        parameters=params,
        notes=(
            "from the Keras model's layers and shapes: not run",
            "element-wise kernels unfused (XLA fusion not modelled)",
        ),
        memory_bytes={
            "parameters": nbytes(model.weights),
            "gradients": nbytes(weights),  # one per trainable variable, in its dtype
            "optimizer_state": int(state),
            "activations": int(acts),
            # backward's working set: the widest layer's output gradient and its input's
            "transient": int(2 * widest),
        },
    )


def _leaf_layers(model: Any) -> Iterator[Any]:
    for layer in model.layers:
        if hasattr(layer, "layers") and not hasattr(layer, "forward_layer"):
            yield from _leaf_layers(layer)
        else:
            yield layer


def _shapes(layer: Any, which: str, batch: int) -> list[Shape]:
    tensors = getattr(layer, which)
    tensors = tensors if isinstance(tensors, list | tuple) else [tensors]
    out = []
    for t in tensors:
        dims = [batch if i == 0 and d is None else d for i, d in enumerate(t.shape)]
        if any(d is None for d in dims):
            raise ValueError(f"layer {layer.name} has an unknown dimension: {t.shape}")
        out.append(tuple(int(d) for d in dims))
    return out


def _loss(model: Any, outs: list[Shape], dtype: str) -> tuple[list[Operator], list[Operator]]:
    """The loss kernels: softmax cross-entropy over the last axis (log-softmax, its gather
    and mean; backward the softmax gradient), else element-wise error terms and a mean."""
    y = outs[0]
    n, rows, width = math.prod(y), math.prod(y[:-1]), y[-1]
    loss = model.loss
    fn = getattr(loss, "fn", loss)
    text = f"{getattr(fn, '__name__', '')}{type(loss).__name__}".lower()
    name, es = "keras.loss", ELEMENT_BYTES.get(dtype, 4)
    if "categorical" in text and width > 1:
        dims = {"B": rows, "H": width}
        return (
            [
                Operator(
                    "softmax",
                    "forward",
                    name,
                    dims,
                    dtype,
                    "log_softmax",
                    float(n),
                    float(2 * n * es),
                ),
                Operator(
                    "reduction",
                    "forward",
                    name,
                    {"numel": rows, "out": 1},
                    dtype,
                    "mean",
                    float(rows),
                    float(rows * es),
                ),
            ],
            [
                Operator(
                    "softmax",
                    "backward",
                    name,
                    dims,
                    dtype,
                    "log_softmax_backward",
                    float(n),
                    float(3 * n * es),
                )
            ],
        )
    terms = [elementwise("forward", name, "error", n, 2, dtype) for _ in range(3)]
    mean = Operator(
        "reduction", "forward", name, {"numel": n, "out": 1}, dtype, "mean", float(n), float(n * es)
    )
    return [*terms, mean], [
        elementwise("backward", name, "error_backward", n, 2, dtype) for _ in range(3)
    ]


def _optimizer(optimizer: Any, weights: list[Any], dtype: str) -> list[Operator]:
    """Per trainable variable, its update's tensor-sized kernels (``UPDATE_KERNELS``)."""
    kind = type(optimizer).__name__
    if float(getattr(optimizer, "momentum", 0) or 0) > 0:
        kind += "+momentum"
    per = UPDATE_KERNELS.get(kind, UPDATE_KERNELS.get(kind.split("+")[0], 12))
    es = ELEMENT_BYTES.get(dtype, 4)
    out = []
    for w in weights:
        n = int(math.prod(w.shape))
        dims = {
            "numel": n,
            "tensors": 1,
            "blocks": max(1, -(-n // 65_536)),
            "depth": 1,
            "foreach": 0,
        }
        out.append(
            Operator(
                "optimizer",
                "optimizer",
                f"keras.{kind}",
                dims,
                dtype,
                "update",
                float(n),
                float(3 * n * es),
                count=per,
            )
        )
    return out
