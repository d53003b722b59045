"""Operators of a trace -> rows of the kernel model's families, with what each extrapolates.

The measured tables cover float32 forward kernels of six kinds. Everything else is predicted
by its nearest measured family and flagged (``Reason``), which widens its interval:

- a 1x1 convolution is a matrix product (``gemm``); a weight-gradient convolution is the
  matrix product ``Cout x (Cin k k)`` reduced over ``B Ho Wo``; a data-gradient convolution
  is the forward convolution with the channels swapped, on the input grid;
- layer-norm, softmax and element-wise backward kernels are their family at the backward's
  memory traffic (``Operator.bytes``);
- reduction, embedding, copy, optimizer and other kernels are element-wise traffic;
- bfloat16/float16 products, and float32 convolutions where cuDNN uses TF32 (PyTorch's
  default on Ampere and later), use the tensor-core peak at the utilisation fitted for
  float32 (a prior); float32 matmuls do not use TF32 unless allowed (PyTorch default since
  1.12: ``torch.backends.cuda.matmul.allow_tf32 = False``).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

from advisor.probes.operators.types import Operator

DTYPE_BYTES = {"float32": 4, "float64": 8, "bfloat16": 2, "float16": 2, "int64": 8, "int32": 4,
               "int8": 1, "uint8": 1, "bool": 1}  # fmt: skip
TRANSCENDENTAL_OPS = frozenset({"gelu", "tanh", "pow", "exp", "log", "sigmoid", "erf", "rsqrt",
                                "sqrt", "silu", "softplus", "sin", "cos", "elu", "mish"})  # fmt: skip
# Prior widenings (natural log, added to each side of the interval).
WIDEN = {
    "tensor_cores": math.log(1.5),
    "unmeasured_kind": math.log(2.0),
    "backward_traffic": math.log(1.3),
    "conv_geometry": math.log(1.25),
    "low_precision_traffic": math.log(1.15),
}
NOTES = {
    "tensor_cores": "tensor-core kernels (bf16/fp16, or TF32 convolutions) extrapolated from "
    "float32 measurements at the tensor-core peak (prior, wider interval)",
    "unmeasured_kind": "reduction/embedding/copy/optimizer/other kernels predicted from their "
    "memory traffic with the element-wise fit (no measurements of these kinds; wider interval)",
    "backward_traffic": "normalisation and softmax backward predicted at the backward's memory "
    "traffic with the forward fit (wider interval)",
    "conv_geometry": "convolutions other than 3x3 stride 1 (the measured ones) and gradient "
    "convolutions predicted as implicit matrix products (wider interval)",
    "low_precision_traffic": "16-bit memory-bound kernels predicted from float32 bandwidth fits",
}


@dataclass(frozen=True)
class Placed:
    """One operator as a family row (per GPU the peak is chosen by ``precision``)."""

    family: str
    cols: dict[str, float]
    precision: str  # "fp32", "tf32", "bf16", "fp16": which peak the GPU offers this kernel
    reasons: tuple[str, ...]


def _dtype_bytes(op: Operator) -> int:
    return DTYPE_BYTES.get(op.dtype.replace("torch.", ""), 4)


def _precision(op: Operator, tensor_core_fp32: bool) -> tuple[str, tuple[str, ...]]:
    dtype = op.dtype.replace("torch.", "")
    if dtype in ("bfloat16", "float16"):
        return ("bf16" if dtype == "bfloat16" else "fp16"), ("tensor_cores",)
    if tensor_core_fp32:
        return "tf32", ("tensor_cores",)
    return "fp32", ()


def _gemm(b: float, m: float, n: float, k: float, size: int, is_bmm: float,
          flops: float = 0.0, nbytes: float = 0.0) -> dict[str, float]:  # fmt: skip
    return {
        "B": b, "M": m, "N": n, "K": k, "is_bmm": is_bmm,
        "flops": flops or 2.0 * b * m * n * k,
        "bytes": nbytes or size * b * (m * k + k * n + m * n),
    }  # fmt: skip


def _conv(op: Operator, size: int, tf32_conv: bool) -> Placed:
    d = op.dims
    b, cin, cout = d["B"], d["Cin"], d["Cout"]
    ks, h, w = d.get("kernel", 1), d["H"], d.get("W", d["H"])
    stride, pad, groups = d.get("stride", 1), d.get("padding", 0), d.get("groups", 1)
    ho = (h + 2 * pad - ks) // stride + 1
    wo = (w + 2 * pad - ks) // stride + 1
    precision, reasons = _precision(op, tf32_conv)
    role = op.op or "forward"
    nbytes = op.bytes or size * (
        b * cin * h * w + cout * cin // groups * ks * ks + b * cout * ho * wo
    )
    measured_geometry = ks == 3 and stride == 1 and groups == 1 and role == "forward"
    if not measured_geometry:
        reasons += ("conv_geometry",)
    if role == "weight_grad":
        cols = _gemm(groups, cout / groups, cin / groups * ks * ks, b * ho * wo, size, 0.0,
                     op.flops, nbytes)  # fmt: skip
        return Placed("gemm", cols, precision, reasons)
    if role == "data_grad":  # the forward convolution with the channels swapped
        cin, cout, ho, wo = cout, cin, h, w
    if groups > 1 or ks == 1:
        cols = _gemm(groups, b * ho * wo, cout / groups, cin / groups * ks * ks, size,
                     1.0 if groups > 1 else 0.0, op.flops, nbytes)  # fmt: skip
        return Placed("gemm", cols, precision, reasons)
    m, n, kk = b * ho * wo, cout, cin * ks * ks
    cols = {"B": 1.0, "M": m, "N": n, "K": kk, "flops": op.flops or 2.0 * m * n * kk,
            "bytes": nbytes, "cin": cin, "hw": ho * wo}  # fmt: skip
    return Placed("conv", cols, precision, reasons)


def _elementwise(op: Operator, size: int, numel: float, inputs: float, unmeasured: bool) -> Placed:
    nbytes = op.bytes or size * numel * (inputs + 1)
    if op.bytes and numel > 0:
        inputs = min(2.0, max(1.0, round(op.bytes / (size * numel)) - 1.0))
    name = (op.op or op.name).lower()
    transcendental = 1.0 if any(t in name for t in TRANSCENDENTAL_OPS) else 0.0
    reasons: tuple[str, ...] = ("unmeasured_kind",) if unmeasured else ()
    if size < 4:
        reasons += ("low_precision_traffic",)
    cols = {"bytes": max(nbytes, 1.0), "inputs": inputs, "transcendental": transcendental}
    return Placed("elementwise", cols, "fp32", reasons)


def place(op: Operator, tf32_matmul: bool = False, tf32_conv: bool = True) -> Placed:
    """The family row of ``op`` (see the module docstring for each kind's rule)."""
    size, d = _dtype_bytes(op), op.dims
    if op.kind in ("linear", "bmm"):
        precision, reasons = _precision(op, tf32_matmul)
        cols = _gemm(d.get("B", 1), d["M"], d["N"], d["K"], size,
                     1.0 if op.kind == "bmm" else 0.0, op.flops, op.bytes)  # fmt: skip
        return Placed("gemm", cols, precision, reasons)
    if op.kind == "conv":
        return _conv(op, size, tf32_conv)
    if op.kind in ("layernorm", "softmax"):
        rows, h = float(d["B"]), float(d["H"])
        forward_bytes = size * (2 * rows * h + (2 * h + 2 * rows if op.kind == "layernorm" else 0))
        reasons = ("low_precision_traffic",) if size < 4 else ()
        if op.phase == "backward":
            reasons += ("backward_traffic",)
        nbytes = op.bytes or (2.0 if op.phase == "backward" else 1.0) * forward_bytes
        return Placed(op.kind, {"R": rows, "H": h, "bytes": nbytes}, "fp32", reasons)
    if op.kind == "elementwise":
        inputs = float(d.get("inputs", 2 if op.phase == "backward" else 1))
        return _elementwise(op, size, float(d.get("numel", 1)), min(max(inputs, 1.0), 2.0),
                            unmeasured=False)  # fmt: skip
    numel = float(d.get("numel", 1))
    if op.kind == "optimizer":  # read param, grad, state; write param, state (SGD momentum)
        nbytes = op.bytes or 5.0 * size * numel
        return _elementwise(
            Operator(op.kind, op.phase, op.name, op.dims, op.dtype, op.op, 0.0, nbytes),
            size, numel, 1.0, unmeasured=True,
        )  # fmt: skip
    return _elementwise(op, size, numel, 1.0, unmeasured=True)


def notes_for(reasons: Collection[str]) -> list[str]:
    """The user-facing notes of a set of reasons, in a stable order."""
    return [NOTES[r] for r in WIDEN if r in set(reasons)]
