"""One dispatched aten op -> the ``Operator`` records of the kernels it launches.

:func:`records` maps an op seen by the tracer's dispatch mode (after autograd, so forward,
backward and optimizer ops alike) to its kind, dims, FLOPs and bytes:

- ``mm``/``addmm``/``mv``/``dot`` -> ``linear`` (B = 1, an M x K by K x N product); a
  ``nn.Linear`` on a 3-D input reaches the dispatcher as one ``addmm`` with M = batch x tokens;
  ``bmm``/``baddbmm`` -> ``bmm``.
- ``convolution`` -> ``conv``; ``convolution_backward`` -> one ``conv`` per gradient its output
  mask asks for (``op`` data_grad, weight_grad; each with the forward's dims and FLOPs) and a
  ``reduction`` for the bias gradient.
- layer norm, softmax (and log-softmax), embedding and their backward ops -> their kinds;
  ops tagged ``pointwise`` by PyTorch (and fills, random masks, dropout) -> ``elementwise``;
  ops tagged ``reduction`` -> ``reduction``; cat/clone/copy -> ``copy``; anything else that
  launches a kernel -> ``other`` with its bytes.
- views (``Tensor(a)`` aliases in the schema), ``_unsafe_view``, allocations without a fill
  and host-only ops launch nothing: no record.

FLOPs: 2 per multiply-add for products and convolutions (as ``torch.utils.flop_counter``);
a nominal one per element of the largest tensor for element-wise, normalisation, softmax and
reduction kernels (they are bound by memory traffic, which ``bytes`` gives); 0 for copies,
gathers and ``other``. Bytes: every distinct tensor read once (a broadcast operand by its
distinct elements) plus every output written once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from advisor.probes.operators import aten_products as products
from advisor.probes.operators.tensors import dtype_name, nbytes, tensors_of, traffic
from advisor.probes.operators.types import Operator

DeviceTest = Callable[[Any], bool]  # whether a tensor lives on the traced (GPU) device

LINEAR = {"mm", "addmm", "_addmm_activation", "mv", "addmv", "dot", "vdot", "_int_mm"}
BMM = {"bmm", "baddbmm"}
CONV = {"convolution", "_convolution", "convolution_overrideable"}
LAYERNORM = {
    "native_layer_norm",
    "native_layer_norm_backward",
    "_fused_rms_norm",
    "_fused_rms_norm_backward",
}
SOFTMAX = {
    "_softmax",
    "_log_softmax",
    "_safe_softmax",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
}
EMBEDDING = {"embedding", "embedding_dense_backward"}
COPY = {"cat", "clone", "copy_", "_to_copy", "lift_fresh_copy", "_copy_from", "stack"}
FILL = {
    "fill_",
    "zero_",
    "zeros",
    "ones",
    "full",
    "zeros_like",
    "ones_like",
    "full_like",
    "new_zeros",
    "new_ones",
    "new_full",
    "scalar_tensor",
}
RANDOM = {"bernoulli", "bernoulli_", "uniform_", "normal_", "rand", "randn", "rand_like"}
ELEMENTWISE_EXTRA = {"native_dropout", "native_dropout_backward", "where", "masked_fill"}
NO_KERNEL = {
    "_unsafe_view",
    "unsafe_split",
    "unsafe_split_with_sizes",
    "unsafe_chunk",
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "resize_",
    "set_",
    "_local_scalar_dense",
    "_has_compatible_shallow_copy_type",
    "is_same_size",
    "record_stream",
    "_efficientzerotensor",
    "sym_size",
    "sym_stride",
    "sym_numel",
    "sym_storage_offset",
}
# Loss kernels that read one element per row of their (N x C) input, not all of it.
ROW_GATHER = {"nll_loss_forward", "nll_loss2d_forward", "nll_loss_backward", "nll_loss2d_backward"}


def launches_kernel(func: Any) -> bool:
    """Whether the aten op ``func`` can launch a kernel at all (views and allocations do not)."""
    import torch

    if func.namespace != "aten":
        return False
    in_place_view = torch.Tag.inplace_view in func.tags  # as_strided_, squeeze_: metadata
    return not (func.is_view or in_place_view or func._opname in NO_KERNEL)


def records(
    func: Any,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    out: Any,
    phase: str,
    on_device: DeviceTest,
) -> list[Operator]:
    """The kernels the aten op ``func`` launches, called on ``args`` giving ``out``, in
    ``phase``; empty for ops that launch none or that touch no tensor of the traced device
    (host-side scalars). Multi-tensor ops (``_foreach_*``, ``_fused_*``) are not handled
    here: see :mod:`advisor.probes.operators.optimizer`."""
    if not launches_kernel(func):
        return []
    ins, outs = tensors_of((args, kwargs)), tensors_of(out)
    if not any(on_device(t) for t in (*ins, *outs)):
        return []
    name, short = f"aten.{func._opname}", func._opname
    if short in {"copy_", "_to_copy", "_copy_from"} and _crosses_device(ins, outs, on_device):
        return []  # a host <-> device transfer: a memcpy, not a kernel
    dtype = dtype_name((outs or ins)[0].dtype)
    mapper = _MAPPERS.get(short)
    if mapper is not None:
        return mapper(name, short, args, ins, outs, phase, dtype)
    return [_generic(func, name, short, ins, outs, phase, dtype)]


def _crosses_device(ins: list[Any], outs: list[Any], on_device: DeviceTest) -> bool:
    flags = {on_device(t) for t in (*ins, *outs)}
    return len(flags) > 1


def _largest(ins: Sequence[Any], outs: Sequence[Any]) -> int:
    return max((t.numel() for t in (*ins, *outs)), default=0)


# --- per kind ------------------------------------------------------------------------------
def _layernorm(
    name: str,
    short: str,
    args: Sequence[Any],
    ins: list[Any],
    outs: list[Any],
    phase: str,
    dtype: str,
) -> list[Operator]:
    backward = "backward" in short
    x, shape = (args[1], args[2]) if backward else (args[0], args[1])
    h = math.prod(int(s) for s in shape)
    rows = x.numel() // max(1, h)
    op = "rms_norm" if "rms" in short else short.removeprefix("native_")
    return [
        Operator(
            "layernorm",
            phase,
            name,
            {"B": rows, "H": h},
            dtype,
            op,
            float(_largest(ins, outs)),
            traffic(ins, outs),
        )
    ]


def _softmax(
    name: str,
    short: str,
    args: Sequence[Any],
    ins: list[Any],
    outs: list[Any],
    phase: str,
    dtype: str,
) -> list[Operator]:
    x = args[0]
    dim = int(args[2] if "backward" in short else args[1]) % max(1, x.dim())
    h = int(x.shape[dim]) if x.dim() else 1
    op = short.lstrip("_").removesuffix("_data")
    return [
        Operator(
            "softmax",
            phase,
            name,
            {"B": x.numel() // max(1, h), "H": h},
            dtype,
            op,
            float(x.numel()),
            traffic(ins, outs),
        )
    ]


def _embedding(
    name: str,
    short: str,
    args: Sequence[Any],
    ins: list[Any],
    outs: list[Any],
    phase: str,
    dtype: str,
) -> list[Operator]:
    if short == "embedding":  # gathers one row per index
        weight, indices = args[0], args[1]
        y = outs[0]
        dims = {"numel": y.numel(), "rows": int(weight.shape[0]), "width": int(weight.shape[-1])}
        way, flops, moved = "forward", 0.0, nbytes(indices) + 2 * y.numel() * y.element_size()
    else:
        grad, indices, rows = args[0], args[1], int(args[2])
        width = int(grad.shape[-1])
        dims = {"numel": grad.numel(), "rows": rows, "width": width}
        written = rows * width * grad.element_size()  # the dense table gradient
        way, flops = "backward", float(grad.numel())
        moved = nbytes(grad) + nbytes(indices) + written
    return [Operator("embedding", phase, name, dims, dtype, way, flops, float(moved))]


def _copy(
    name: str,
    short: str,
    args: Sequence[Any],
    ins: list[Any],
    outs: list[Any],
    phase: str,
    dtype: str,
) -> list[Operator]:
    written = outs or ins[:1]
    numel = sum(t.numel() for t in written)
    reads = ins[1:] if short == "copy_" else ins  # copy_(dst, src) reads src
    op = "cat" if short in {"cat", "stack"} else "clone" if short == "clone" else "copy"
    return [
        Operator("copy", phase, name, {"numel": numel}, dtype, op, 0.0, traffic(reads, written))
    ]


def _elementwise(
    name: str, short: str, ins: list[Any], outs: list[Any], phase: str, dtype: str
) -> Operator:
    op = short.removesuffix("_")
    if short in FILL:
        op = "fill"
    elif short in RANDOM:
        op = "random"
    elif short == "native_dropout":
        op = "dropout"
    elif short == "native_dropout_backward":
        op = "dropout_backward"
    written = outs or ins[:1]
    numel = max((t.numel() for t in written), default=0)
    operands = len({id(t) for t in ins if t.numel() > 1})
    reads = [] if short in FILL else ins
    return Operator(
        "elementwise",
        phase,
        name,
        {"numel": numel, "inputs": operands},
        dtype,
        op,
        float(numel),
        traffic(reads, written),
    )


def _generic(
    func: Any, name: str, short: str, ins: list[Any], outs: list[Any], phase: str, dtype: str
) -> Operator:
    import torch

    tags = set(func.tags)
    if (
        short in FILL
        or short in RANDOM
        or short in ELEMENTWISE_EXTRA
        or (torch.Tag.pointwise in tags)
    ):
        return _elementwise(name, short, ins, outs, phase, dtype)
    if torch.Tag.reduction in tags:
        n = max((t.numel() for t in ins), default=0)
        out_n = sum(t.numel() for t in outs)
        return Operator(
            "reduction",
            phase,
            name,
            {"numel": n, "out": out_n},
            dtype,
            short.removesuffix("_"),
            float(n),
            traffic(ins, outs),
        )
    reads = ins
    if short in ROW_GATHER:  # (N x C) scores: one element per row read (forward) or none
        backward = "backward" in short
        reads = [t for i, t in enumerate(ins) if i != (1 if backward else 0)]
        extra = 0 if backward else ins[1].numel() * ins[0].element_size()
        numel = max((t.numel() for t in (*reads, *outs)), default=0)
        return Operator(
            "other", phase, name, {"numel": numel}, dtype, short, 0.0, traffic(reads, outs) + extra
        )
    numel = max((t.numel() for t in (*ins, *outs)), default=0)
    return Operator("other", phase, name, {"numel": numel}, dtype, short, 0.0, traffic(reads, outs))


Mapper = Callable[[str, str, Sequence[Any], list[Any], list[Any], str, str], list[Operator]]
_MAPPERS: dict[str, Mapper] = {
    **dict.fromkeys(LINEAR, products.linear),
    **dict.fromkeys(BMM, products.bmm),
    **dict.fromkeys(CONV, products.conv),
    "convolution_backward": products.conv_backward,
    **dict.fromkeys(LAYERNORM, _layernorm),
    **dict.fromkeys(SOFTMAX, _softmax),
    **dict.fromkeys(EMBEDDING, _embedding),
    **dict.fromkeys(COPY, _copy),
    **dict.fromkeys(
        (
            "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_cudnn_attention",
            "_scaled_dot_product_flash_attention_for_cpu_backward",
            "_scaled_dot_product_flash_attention_backward",
            "_scaled_dot_product_efficient_attention_backward",
            "_scaled_dot_product_cudnn_attention_backward",
        ),
        products.sdpa,
    ),
}
