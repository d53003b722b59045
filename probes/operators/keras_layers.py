"""Keras layers -> the ``Operator`` records of their forward and backward kernels.

One handler per layer class (``HANDLERS``), called with the layer, its input and output
shapes at the batch size, the compute dtype and whether the gradient flows into its input
(an earlier layer has trainable weights). See :mod:`.keras_trace` for what each kind maps
to. Layers are duck-typed: nothing here imports Keras.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from advisor.probes.operators.recurrent import ELEMENT_BYTES, recurrent_records
from advisor.probes.operators.types import Operator

Shape = tuple[int, ...]
Records = tuple[list[Operator], list[Operator]]  # forward, backward


def elementwise(phase: str, name: str, op: str, numel: int, inputs: int, dtype: str) -> Operator:
    es = ELEMENT_BYTES.get(dtype, 4)
    return Operator(
        "elementwise",
        phase,
        name,
        {"numel": numel, "inputs": inputs},
        dtype,
        op,
        float(numel),
        float((inputs + 1) * numel * es),
    )


def _gemm(phase: str, name: str, op: str, m: int, n: int, k: int, dtype: str) -> Operator:
    es = ELEMENT_BYTES.get(dtype, 4)
    return Operator(
        "linear",
        phase,
        name,
        {"B": 1, "M": m, "N": n, "K": k},
        dtype,
        op,
        2.0 * m * n * k,
        float((m * k + k * n + m * n) * es),
    )


def _bias_grad(name: str, numel: int, out: int, dtype: str) -> Operator:
    es = ELEMENT_BYTES.get(dtype, 4)
    return Operator(
        "reduction",
        "backward",
        name,
        {"numel": numel, "out": out},
        dtype,
        "bias_grad",
        float(numel),
        float((numel + out) * es),
    )


def _activation(layer: Any, name: str, numel: int, rows: int, width: int, dtype: str) -> Records:
    act = getattr(getattr(layer, "activation", None), "__name__", "linear")
    if act == "linear":
        return [], []
    if act in ("softmax", "log_softmax"):
        es = ELEMENT_BYTES.get(dtype, 4)
        dims = {"B": rows, "H": width}
        return (
            [
                Operator(
                    "softmax",
                    "forward",
                    name,
                    dims,
                    dtype,
                    act,
                    float(numel),
                    float(2 * numel * es),
                )
            ],
            [
                Operator(
                    "softmax",
                    "backward",
                    name,
                    dims,
                    dtype,
                    f"{act}_backward",
                    float(numel),
                    float(3 * numel * es),
                )
            ],
        )
    return [elementwise("forward", name, act, numel, 1, dtype)], [
        elementwise("backward", name, f"{act}_backward", numel, 2, dtype)
    ]


def _dense(layer: Any, ins: list[Shape], outs: list[Shape], dtype: str, flow: bool) -> Records:
    name = "keras.Dense"
    k, n = ins[0][-1], outs[0][-1]
    m = math.prod(ins[0][:-1])
    fwd, bwd = [_gemm("forward", name, "matmul", m, n, k, dtype)], []
    if layer.use_bias:
        fwd.append(elementwise("forward", name, "bias_add", m * n, 2, dtype))
        bwd.append(_bias_grad(name, m * n, n, dtype))
    af, ab = _activation(layer, name, m * n, m, n, dtype)
    if flow:
        bwd.append(_gemm("backward", name, "data_grad", m, k, n, dtype))
    bwd.append(_gemm("backward", name, "weight_grad", k, n, m, dtype))
    return fwd + af, ab + bwd


def _conv(layer: Any, ins: list[Shape], outs: list[Shape], dtype: str, flow: bool) -> Records:
    name = f"keras.{type(layer).__name__}"
    x, y = ins[0], outs[0]
    last = getattr(layer, "data_format", "channels_last") == "channels_last"
    spatial_x = x[1:-1] if last else x[2:]
    c_in = x[-1] if last else x[1]
    c_out = y[-1] if last else y[1]
    kernel = tuple(layer.kernel_size)
    depthwise = type(layer).__name__ == "DepthwiseConv2D"
    groups = c_in if depthwise else int(getattr(layer, "groups", 1))
    same = layer.padding == "same"
    dims = {
        "B": x[0],
        "Cin": c_in,
        "Cout": c_out,
        "kernel": kernel[0],
        "H": spatial_x[0],
        "W": spatial_x[1] if len(spatial_x) > 1 else 1,
        "stride": int(layer.strides[0]),
        "padding": kernel[0] // 2 if same else 0,
        "groups": groups,
    }
    if len(kernel) > 1 and kernel[1] != kernel[0]:
        dims["kernel_w"] = kernel[1]
    es = ELEMENT_BYTES.get(dtype, 4)
    out_numel, in_numel = math.prod(y), math.prod(x)
    w_numel = math.prod(kernel) * c_in * c_out // groups
    flops = 2.0 * out_numel * (c_in // groups) * math.prod(kernel)
    moved = float((in_numel + w_numel + out_numel) * es)
    fwd = [Operator("conv", "forward", name, dims, dtype, "forward", flops, moved)]
    bwd = [Operator("conv", "backward", name, dims, dtype, "weight_grad", flops, moved)]
    if flow:
        bwd.insert(0, Operator("conv", "backward", name, dims, dtype, "data_grad", flops, moved))
    if layer.use_bias:
        fwd.append(elementwise("forward", name, "bias_add", out_numel, 2, dtype))
        bwd.append(_bias_grad(name, out_numel, c_out, dtype))
    af, ab = _activation(layer, name, out_numel, out_numel // c_out, c_out, dtype)
    return fwd + af, ab + bwd


def _recurrent(layer: Any, ins: list[Shape], outs: list[Shape], dtype: str, flow: bool) -> Records:
    bidir = hasattr(layer, "forward_layer")
    cell_layer = layer.forward_layer if bidir else layer
    cell = {"LSTM": "lstm", "GRU": "gru", "SimpleRNN": "rnn_tanh"}[type(cell_layer).__name__]
    spec = {
        "steps": ins[0][1],
        "batch": ins[0][0],
        "input_size": ins[0][-1],
        "hidden": int(cell_layer.units),
        "directions": 2 if bidir else 1,
        "input_grad": flow,
        "bias": bool(cell_layer.use_bias),
        "dtype": dtype,
    }
    return recurrent_records(cell, "forward", **spec), recurrent_records(cell, "backward", **spec)


def _batch_norm(layer: Any, ins: list[Shape], outs: list[Shape], dtype: str, flow: bool) -> Records:
    n, es = math.prod(ins[0]), ELEMENT_BYTES.get(dtype, 4)
    name = "keras.BatchNormalization"
    return (
        [
            Operator(
                "other", "forward", name, {"numel": n}, dtype, "batch_norm", 0.0, float(2 * n * es)
            )
        ],
        [
            Operator(
                "other",
                "backward",
                name,
                {"numel": n},
                dtype,
                "batch_norm_backward",
                0.0,
                float(3 * n * es),
            )
        ],
    )


def _layer_norm(layer: Any, ins: list[Shape], outs: list[Shape], dtype: str, flow: bool) -> Records:
    x, es = ins[0], ELEMENT_BYTES.get(dtype, 4)
    dims, n, name = {"B": math.prod(x[:-1]), "H": x[-1]}, math.prod(x), "keras.LayerNormalization"
    return (
        [
            Operator(
                "layernorm", "forward", name, dims, dtype, "layer_norm", float(n), float(2 * n * es)
            )
        ],
        [
            Operator(
                "layernorm",
                "backward",
                name,
                dims,
                dtype,
                "layer_norm_backward",
                float(n),
                float(3 * n * es),
            )
        ],
    )


def _act_layer(layer: Any, ins: list[Shape], outs: list[Shape], dtype: str, flow: bool) -> Records:
    y = outs[0]
    if type(layer).__name__ == "Softmax":
        layer = type("Act", (), {"activation": type("f", (), {"__name__": "softmax"})})()
    elif type(layer).__name__ != "Activation":
        op = type(layer).__name__.lower()
        layer = type("Act", (), {"activation": type("f", (), {"__name__": op})})()
    return _activation(layer, "keras.Activation", math.prod(y), math.prod(y[:-1]), y[-1], dtype)


def _dropout(layer: Any, ins: list[Shape], outs: list[Shape], dtype: str, flow: bool) -> Records:
    n = math.prod(outs[0])
    if float(getattr(layer, "rate", 0.0)) <= 0:
        return [], []
    return [elementwise("forward", "keras.Dropout", "dropout", n, 1, dtype)], [
        elementwise("backward", "keras.Dropout", "dropout_backward", n, 2, dtype)
    ]


def _merge(layer: Any, ins: list[Shape], outs: list[Shape], dtype: str, flow: bool) -> Records:
    name, n = f"keras.{type(layer).__name__}", math.prod(outs[0])
    op = type(layer).__name__.lower()
    if op == "add":
        return [elementwise("forward", name, "add", n, len(ins), dtype)], []
    return [elementwise("forward", name, "mul", n, len(ins), dtype)], [
        elementwise("backward", name, "mul", n, 2, dtype) for _ in ins
    ]


def _copy(phase: str, name: str, op: str, numel: int, dtype: str) -> Operator:
    es = ELEMENT_BYTES.get(dtype, 4)
    return Operator("copy", phase, name, {"numel": numel}, dtype, op, 0.0, float(2 * numel * es))


def _moves(layer: Any, ins: list[Shape], outs: list[Shape], dtype: str, flow: bool) -> Records:
    name, n = f"keras.{type(layer).__name__}", math.prod(outs[0])
    back = [_copy("backward", name, "slice", math.prod(s), dtype) for s in ins]
    return [_copy("forward", name, type(layer).__name__.lower(), n, dtype)], back


def _pool(layer: Any, ins: list[Shape], outs: list[Shape], dtype: str, flow: bool) -> Records:
    kind = type(layer).__name__
    name, n_in, n_out = f"keras.{kind}", math.prod(ins[0]), math.prod(outs[0])
    es = ELEMENT_BYTES.get(dtype, 4)
    if kind.startswith("Global"):
        return (
            [
                Operator(
                    "reduction",
                    "forward",
                    name,
                    {"numel": n_in, "out": n_out},
                    dtype,
                    "mean" if "Average" in kind else "max",
                    float(n_in),
                    float((n_in + n_out) * es),
                )
            ],
            [elementwise("backward", name, "pool_backward", n_in, 1, dtype)],
        )
    return (
        [
            Operator(
                "other",
                "forward",
                name,
                {"numel": n_in},
                dtype,
                kind.lower(),
                0.0,
                float((n_in + n_out) * es),
            )
        ],
        [
            Operator(
                "other",
                "backward",
                name,
                {"numel": n_in},
                dtype,
                f"{kind.lower()}_backward",
                0.0,
                float(2 * (n_in + n_out) * es),
            )
        ],
    )


def _embedding(layer: Any, ins: list[Shape], outs: list[Shape], dtype: str, flow: bool) -> Records:
    n, es = math.prod(outs[0]), ELEMENT_BYTES.get(dtype, 4)
    rows, width = int(layer.input_dim), int(layer.output_dim)
    dims = {"numel": n, "rows": rows, "width": width}
    idx = math.prod(ins[0]) * 4
    return (
        [
            Operator(
                "embedding",
                "forward",
                "keras.Embedding",
                dims,
                dtype,
                "forward",
                0.0,
                float(idx + 2 * n * es),
            )
        ],
        [
            Operator(
                "embedding",
                "backward",
                "keras.Embedding",
                dims,
                dtype,
                "backward",
                float(n),
                float(n * es + idx + rows * width * es),
            )
        ],
    )


def _nothing(layer: Any, ins: list[Shape], outs: list[Shape], dtype: str, flow: bool) -> Records:
    return [], []


def unknown(layer: Any, ins: list[Shape], outs: list[Shape], dtype: str, flow: bool) -> Records:
    n_in, n_out = sum(math.prod(s) for s in ins), sum(math.prod(s) for s in outs)
    es, name = ELEMENT_BYTES.get(dtype, 4), f"keras.{type(layer).__name__}"
    numel = max(n_in, n_out)
    moved = float((n_in + n_out) * es)
    return (
        [Operator("other", "forward", name, {"numel": numel}, dtype, "layer", 0.0, moved)],
        [
            Operator(
                "other", "backward", name, {"numel": numel}, dtype, "layer_backward", 0.0, 2 * moved
            )
        ],
    )


Handler = Callable[[Any, list[Shape], list[Shape], str, bool], Records]
HANDLERS: dict[str, Handler] = {
    "InputLayer": _nothing,
    "Flatten": _nothing,
    "Reshape": _nothing,
    "Dense": _dense,
    "Conv1D": _conv,
    "Conv2D": _conv,
    "DepthwiseConv2D": _conv,
    "LSTM": _recurrent,
    "GRU": _recurrent,
    "SimpleRNN": _recurrent,
    "Bidirectional": _recurrent,
    "BatchNormalization": _batch_norm,
    "LayerNormalization": _layer_norm,
    "Activation": _act_layer,
    "ReLU": _act_layer,
    "Softmax": _act_layer,
    "LeakyReLU": _act_layer,
    "ELU": _act_layer,
    "PReLU": _act_layer,
    "Dropout": _dropout,
    "SpatialDropout2D": _dropout,
    "Add": _merge,
    "Multiply": _merge,
    "Concatenate": _moves,
    "ZeroPadding2D": _moves,
    "Permute": _moves,
    "MaxPooling2D": _pool,
    "AveragePooling2D": _pool,
    "MaxPooling1D": _pool,
    "GlobalAveragePooling2D": _pool,
    "GlobalMaxPooling2D": _pool,
    "GlobalAveragePooling1D": _pool,
    "Embedding": _embedding,
}
