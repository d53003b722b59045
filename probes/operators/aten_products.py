"""The product kernels of aten ops: matrix products, batched products, convolutions (and
their backward: data and weight gradients), fused attention as its products.

FLOPs are 2 per multiply-add (as ``torch.utils.flop_counter``); bytes every distinct
operand read once and every output written once (:func:`.tensors.traffic`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from advisor.probes.operators.tensors import nbytes, traffic
from advisor.probes.operators.types import Operator


def linear(
    name: str,
    short: str,
    args: Sequence[Any],
    ins: list[Any],
    outs: list[Any],
    phase: str,
    dtype: str,
) -> list[Operator]:
    a, b = (args[1], args[2]) if short in {"addmm", "_addmm_activation", "addmv"} else args[:2]
    m = a.shape[0] if a.dim() == 2 else 1
    k = a.shape[-1]
    n = b.shape[-1] if b.dim() == 2 else 1
    dims = {"B": 1, "M": int(m), "N": int(n), "K": int(k)}
    return [
        Operator("linear", phase, name, dims, dtype, short, 2.0 * m * n * k, traffic(ins, outs))
    ]


def bmm(
    name: str,
    short: str,
    args: Sequence[Any],
    ins: list[Any],
    outs: list[Any],
    phase: str,
    dtype: str,
) -> list[Operator]:
    a, b = (args[1], args[2]) if short == "baddbmm" else args[:2]
    bb, m, k = (int(x) for x in a.shape)
    n = int(b.shape[-1])
    dims = {"B": bb, "M": m, "N": n, "K": k}
    return [
        Operator("bmm", phase, name, dims, dtype, short, 2.0 * bb * m * n * k, traffic(ins, outs))
    ]


def conv_dims(
    x: Any,
    w: Any,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    groups: int,
) -> dict[str, int]:
    """A convolution's dims (1-D convolutions as 2-D with W = 1)."""
    spatial = list(x.shape[2:]) or [1]
    kernel = list(w.shape[2:]) or [1]
    c_in = int(x.shape[1])
    c_out = int(w.shape[1]) * groups if transposed else int(w.shape[0])
    dims = {
        "B": int(x.shape[0]),
        "Cin": c_in,
        "Cout": c_out,
        "kernel": int(kernel[0]),
        "H": int(spatial[0]),
        "W": int(spatial[1]) if len(spatial) > 1 else 1,
        "stride": int(stride[0]),
        "padding": int(padding[0]),
        "groups": int(groups),
    }
    if len(kernel) > 1 and kernel[1] != kernel[0]:
        dims["kernel_w"] = int(kernel[1])
    if len(spatial) > 2:
        dims["D"] = int(spatial[2])
    if any(int(d) != 1 for d in dilation):
        dims["dilation"] = int(dilation[0])
    if transposed:
        dims["transposed"] = 1
    return dims


def conv_flops(x: Any, w: Any, y: Any, transposed: bool) -> float:
    """2 x multiply-adds: every output (input, for a transposed conv) element of every
    output channel sums ``Cin / groups x kernel`` products (``w`` is Cout x Cin/groups x k)."""
    per_out = math.prod(int(s) for s in w.shape[1:])
    if transposed:
        return 2.0 * x.numel() * per_out
    return 2.0 * y.numel() * per_out


def conv(
    name: str,
    short: str,
    args: Sequence[Any],
    ins: list[Any],
    outs: list[Any],
    phase: str,
    dtype: str,
) -> list[Operator]:
    x, w = args[0], args[1]
    stride, padding, dilation, transposed = args[3], args[4], args[5], bool(args[6])
    groups = int(args[8])
    dims = conv_dims(x, w, stride, padding, dilation, transposed, groups)
    flops = conv_flops(x, w, outs[0], transposed)
    return [Operator("conv", phase, name, dims, dtype, "forward", flops, traffic(ins, outs))]


def conv_backward(
    name: str,
    short: str,
    args: Sequence[Any],
    ins: list[Any],
    outs: list[Any],
    phase: str,
    dtype: str,
) -> list[Operator]:
    grad_out, x, w = args[0], args[1], args[2]
    stride, padding, dilation, transposed = args[4], args[5], args[6], bool(args[7])
    groups, mask = int(args[9]), args[10]
    dims = conv_dims(x, w, stride, padding, dilation, transposed, groups)
    flops = conv_flops(x, w, grad_out, transposed)
    out: list[Operator] = []
    if mask[0]:  # d input = conv of grad_output with the weight
        out.append(
            Operator(
                "conv", phase, name, dims, dtype, "data_grad", flops, traffic([grad_out, w], [x])
            )
        )
    if mask[1]:  # d weight = conv of the input with grad_output
        out.append(
            Operator(
                "conv", phase, name, dims, dtype, "weight_grad", flops, traffic([grad_out, x], [w])
            )
        )
    if len(mask) > 2 and mask[2]:  # d bias = grad_output summed over all but channels
        n = grad_out.numel()
        out.append(
            Operator(
                "reduction",
                phase,
                name,
                {"numel": n, "out": int(dims["Cout"])},
                dtype,
                "conv_bias_grad",
                float(n),
                float(nbytes(grad_out) + dims["Cout"] * grad_out.element_size()),
            )
        )
    return out


def sdpa(
    name: str,
    short: str,
    args: Sequence[Any],
    ins: list[Any],
    outs: list[Any],
    phase: str,
    dtype: str,
) -> list[Operator]:
    """A fused attention kernel as the products FlashAttention-2 computes (Dao, 2023): two in
    the forward pass (scores, then scores x values), five in the backward pass (the scores
    recomputed, then the gradients of the probabilities, values, queries and keys), each over
    the lower half of the score matrix only when the mask is causal (the kernel skips the
    blocks above the diagonal). The scores and the softmax stay on chip (no record, no score
    matrix in a product's bytes); each product is priced as a batched product by the kernel
    model, a prior: no attention kernel was measured."""
    q, k, v = (args[1], args[2], args[3]) if "backward" in short else args[:3]
    heads = math.prod(int(s) for s in q.shape[:-2])
    t_q, t_k, d, dv = int(q.shape[-2]), int(k.shape[-2]), int(q.shape[-1]), int(v.shape[-1])
    es = q.element_size()
    share = 0.5 if _is_causal(short, args) and t_q == t_k else 1.0

    def bmm(m: int, n: int, kk: int, op: str) -> Operator:
        flops = 2.0 * heads * m * n * kk * share
        moved = heads * (m * kk + kk * n) * es
        return Operator(
            "bmm",
            phase,
            name,
            {"B": heads, "M": m, "N": n, "K": kk},
            dtype,
            op,
            flops,
            float(moved),
        )

    if "backward" not in short:
        return [bmm(t_q, t_k, d, "sdpa_qk"), bmm(t_q, dv, t_k, "sdpa_pv")]
    return [
        bmm(t_q, t_k, d, "sdpa_qk_again"),
        bmm(t_q, t_k, dv, "sdpa_grad_p"),
        bmm(t_k, dv, t_q, "sdpa_grad_v"),
        bmm(t_q, d, t_k, "sdpa_grad_q"),
        bmm(t_k, d, t_q, "sdpa_grad_k"),
    ]


def _is_causal(short: str, args: Sequence[Any]) -> bool:
    """The ``is_causal`` argument of the fused attention op ``short`` (by its schema)."""
    import torch

    packet = getattr(torch.ops.aten, short, None)
    if packet is None:
        return False
    names = [a.name for a in packet.default._schema.arguments]
    i = names.index("is_causal") if "is_causal" in names else len(args)
    return bool(args[i]) if i < len(args) else False
