"""What a device's kernels allocate that the meta kernels of a trace do not (issue #45: a
plan's memory is the memory of the step that runs).

- **A convolution's output format** is the convolution library's choice: cuDNN and oneDNN
  (and ATen's own CPU kernels) write channels-last when the input or the weight is; NNPACK
  writes contiguous. The meta kernels look at the input only, so a channels-last model fed
  contiguous images traces contiguous activations and misses the copies the real layouts
  cause downstream (a flatten's ``clone``, a backward kernel's ``contiguous``). On a GPU the
  rule is cuDNN's (``cudnn_conv_suggest_memory_format``); on a CPU it is PyTorch's own
  decision for that CPU (``torch._C._select_conv_backend`` and
  ``_conv_determine_backend_memory_format``).
- **Max pooling's backward** makes its inputs contiguous in the format it works in, copies a
  meta kernel does not make: on a GPU in the input's format (``DilatedMaxPool2d.cu``: the
  input and the output's gradient); on a CPU in the output gradient's format
  (``MaxPoolKernel.cpp``: the output's gradient, the indices and the gradient it writes,
  copied back). Measured on this CPU with the profiler's allocator records: under
  ``aten::max_pool2d_with_indices_backward/aten::contiguous/aten::clone``.
- **ATen's own CPU convolution** (``Slow2d``, which PyTorch takes where oneDNN cannot run the
  type: float16 on a CPU without float16 instructions) unfolds its input into a column
  buffer of batch x in-channels x kernel height x kernel width x output height x output width
  elements of the input's type (``ConvolutionMM2d.cpp``: ``finput``; none for a 1x1 kernel at
  stride 1 without padding), while the forward kernel runs and again in backward for the
  weight's gradient (measured here under ``aten::_slow_conv2d_forward`` and
  ``aten::_slow_conv2d_backward``, ``aten::empty``).

A memory tracker runs these ops through ``as_on_device`` (it sees each output once, as the
library writes it) and then makes what ``held_beside`` names (it sees that live beside the
outputs, and freed when the kernel returns): no dispatch mode of its own, as one more mode
on every op slowed a transformer's trace by about a fifth.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

RULES = ("cuda", "cpu")
# the ops whose kernels ``as_on_device`` and ``held_beside`` say more of than a meta kernel does
KERNEL_OPS = frozenset({"convolution", "convolution_backward", "max_pool2d_with_indices_backward"})
Call = tuple[Any, tuple[Any, ...], dict[str, Any]]  # an aten op, its args and kwargs
# PyTorch picks some CPU kernels by batch: NNPACK, and oneDNN for a 1x1 float32 convolution on
# one thread, from 16 samples (``use_nnpack``, ``use_mkldnn`` in ``Convolution.cpp``)
LARGE_BATCH = 16


def conv_format(rules: str, input: Any, weight: Any, args: Any) -> Any:
    """The memory format the convolution library of ``rules`` writes a 4-D convolution's
    output in (``args``: ``aten.convolution``'s after input and weight), or None to keep the
    meta kernel's."""
    import torch
    from torch._prims_common import suggest_memory_format

    if input.dim() != 4:
        return None
    if rules == "cuda":
        last = torch.channels_last in (suggest_memory_format(input), suggest_memory_format(weight))
        return torch.channels_last if last else torch.contiguous_format
    backend = cpu_conv_backend(input, weight, args)
    return torch._C._conv_determine_backend_memory_format(input, weight, backend)


def cpu_conv_backend(input: Any, weight: Any, args: Any) -> Any:
    """PyTorch's choice of convolution kernel on this CPU (``torch._C._ConvBackend``) at a
    batch of ``LARGE_BATCH`` or more: the batches a trace's lines stand for, where it traces
    two or four samples."""
    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    if getattr(input, "fake_mode", None) is not None and input.shape[0] < LARGE_BATCH:
        with _disable_current_modes():  # a fake tensor's metadata, seen by no tracker
            input = input.new_empty_strided((LARGE_BATCH, *input.shape[1:]), input.stride())
    bias, stride, padding, dilation, transposed, output_padding, groups = args[:7]
    return torch._C._select_conv_backend(
        input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, None
    )


def _conv_args(func: Any, args: Any) -> tuple[Any, Any, Any] | None:
    """A convolution's (or its backward's) input, weight and arguments after them as
    ``aten.convolution`` orders them (bias, stride, padding, dilation, transposed, output
    padding, groups); None for other ops."""
    if func._opname == "convolution":
        return args[0], args[1], args[2:9]
    if func._opname == "convolution_backward":
        return args[1], args[2], (None, *args[4:10])
    return None


def column_buffer(input: Any, weight: Any, args: Any) -> int:
    """Elements of ATen's CPU column buffer (``Slow2d``'s ``finput``) for a convolution."""
    import math

    stride, padding, dilation = args[1], args[2], args[3]
    if input.dim() != 4 or (tuple(weight.shape[2:]) == (1, 1) and tuple(stride) == (1, 1)
                            and not any(padding)):  # fmt: skip
        return 0
    out = [
        (size + 2 * pad - d * (k - 1) - 1) // s + 1
        for size, pad, d, k, s in zip(
            input.shape[2:], padding, dilation, weight.shape[2:], stride, strict=True
        )
    ]
    return input.shape[0] * weight.shape[1] * math.prod(weight.shape[2:]) * math.prod(out)


def _in_format(out: Any, fmt: Any) -> Any:
    import torch

    def one(t: Any) -> Any:
        ok = isinstance(t, torch.Tensor) and t.dim() == 4
        return t.contiguous(memory_format=fmt) if ok else t

    return tuple(one(t) for t in out) if isinstance(out, tuple) else one(out)


def conv_output(func: Any, args: Any, out: Any, rules: str) -> Any:
    """``out`` of ``aten.convolution`` or ``aten.convolution_backward`` in the format the
    device's library writes it (the gradients of a backward in its input's)."""
    conv = _conv_args(func, args)
    if conv is None:
        return out
    x, w, rest = conv
    if not x.is_meta and getattr(x, "fake_mode", None) is None:
        return out  # real tensors: the library already chose
    fmt = conv_format(rules, x, w, rest)
    return out if fmt is None else _in_format(out, fmt)


def pool_backward_copies(rules: str, args: Any, grad_input: Any) -> list[Call]:
    """The copies ``max_pool2d_with_indices_backward``'s kernel on ``rules``' device makes
    (``args``: the op's, ``grad_input``: its output)."""
    import torch
    from torch._prims_common import suggest_memory_format

    grad_output, input, indices = args[0], args[1], args[7]
    if grad_output.dim() != 4:
        return []
    inputs: tuple[Any, ...] = (input, grad_output)  # a GPU's, in the input's format
    fmt = suggest_memory_format(input)
    if rules == "cpu":
        fmt, inputs = suggest_memory_format(grad_output), (grad_output, indices, grad_input)
    clone = torch.ops.aten.clone.default
    return [(clone, (t,), {"memory_format": fmt}) for t in inputs
            if not t.is_contiguous(memory_format=fmt)]  # fmt: skip


def held_beside(rules: str, func: Any, args: Any, out: Any) -> list[Call]:
    """What ``func``'s kernel on ``rules``' device allocates beside its outputs (``out``) while
    it runs, as the aten calls that allocate the same (for a memory tracker to make and see)."""
    import torch

    if func._opname == "max_pool2d_with_indices_backward":
        return pool_backward_copies(rules, args, out)
    conv = _conv_args(func, args)
    if rules != "cpu" or conv is None:
        return []
    x, w, rest = conv
    if cpu_conv_backend(x, w, rest) != torch._C._ConvBackend.Slow2d:  # type: ignore[attr-defined]
        return []
    if func._opname == "convolution_backward" and not args[10][1]:
        return []  # backward without the weight's gradient: no columns
    empty = torch.ops.aten.empty.memory_format
    return [(empty, ([column_buffer(x, w, rest)],), {"dtype": x.dtype, "device": x.device})]


def as_on_device(func: Any, rules: str) -> Callable[..., Any]:
    """``func`` whose outputs take the format ``rules``' device writes them in (``conv_output``),
    for a memory tracker to run in its place."""
    if rules not in RULES:
        raise ValueError(f"rules must be one of {RULES}, but got {rules!r}")

    def run(*args: Any, **kwargs: Any) -> Any:
        return conv_output(func, args, func(*args, **kwargs), rules)

    return run
