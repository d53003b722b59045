"""What a device's kernels allocate that a meta kernel does not (``kernel_memory``): the
convolution's output format, max pooling's backward copies, ATen's CPU column buffer."""

from __future__ import annotations

import pytest
import torch
from advisor.probes.operators.kernel_memory import (
    as_on_device,
    column_buffer,
    conv_format,
    conv_output,
    held_beside,
    pool_backward_copies,
)

CONV = torch.ops.aten.convolution.default
LAST = torch.channels_last


def _conv_args(x: torch.Tensor, w: torch.Tensor, padding: int = 0) -> tuple:
    return (x, w, None, [1, 1], [padding, padding], [1, 1], False, [0, 0], 1)


def test_a_channels_last_weight_makes_the_gpus_convolution_write_channels_last() -> None:
    """cuDNN's rule: a contiguous input and a channels-last weight give a channels-last output,
    where the meta kernel (which looks at the input only) gives a contiguous one."""
    x = torch.empty(8, 32, 26, 26, device="meta")
    w = torch.empty(64, 32, 3, 3, device="meta").contiguous(memory_format=LAST)
    out = CONV(*_conv_args(x, w))
    assert out.is_contiguous() and not out.is_contiguous(memory_format=LAST)
    assert conv_output(CONV, _conv_args(x, w), out, "cuda").is_contiguous(memory_format=LAST)
    plain = torch.empty(64, 32, 3, 3, device="meta")
    assert conv_format("cuda", x, plain, ()) == torch.contiguous_format


def test_on_a_cpu_the_format_is_pytorchs_own_choice_for_this_cpu() -> None:
    """On a CPU the rule is PyTorch's decision (its convolution backend and that backend's
    format): it agrees with what a real convolution here writes."""
    x = torch.randn(4, 32, 26, 26)
    w = torch.randn(64, 32, 3, 3).contiguous(memory_format=LAST)
    real = torch.nn.functional.conv2d(x, w)
    fmt = conv_format("cpu", x, w, _conv_args(x, w)[2:])
    assert real.is_contiguous(memory_format=fmt)


def test_max_pool_backward_copies_into_the_format_its_device_works_in() -> None:
    """A GPU works in the input's format (copying the output's gradient to it); a CPU in the
    output gradient's (copying the indices and the gradient it writes)."""
    grad_output = torch.empty(8, 64, 12, 12, device="meta")  # contiguous (after a flatten)
    input = torch.empty(8, 64, 24, 24, device="meta").contiguous(memory_format=LAST)
    indices = torch.empty(8, 64, 12, 12, dtype=torch.int64, device="meta").contiguous(
        memory_format=LAST
    )
    grad_input = torch.empty_like(input)
    args = (grad_output, input, [2, 2], [2, 2], [0, 0], [1, 1], False, indices)
    cuda = [op(*a, **k) for op, a, k in pool_backward_copies("cuda", args, grad_input)]
    assert [tuple(t.shape) for t in cuda] == [(8, 64, 12, 12)]  # the output's gradient
    assert cuda[0].is_contiguous(memory_format=LAST)
    cpu = [op(*a, **k) for op, a, k in pool_backward_copies("cpu", args, grad_input)]
    assert sorted(str(t.dtype) for t in cpu) == ["torch.float32", "torch.int64"]
    assert sum(t.numel() * t.element_size() for t in cpu) == (
        indices.numel() * 8 + grad_input.numel() * 4
    )
    same = (grad_output.contiguous(memory_format=LAST), input, *args[2:7], indices)
    assert pool_backward_copies("cuda", same, grad_input) == []
    assert pool_backward_copies("cpu", same, grad_input) == []


def test_atens_cpu_column_buffer_is_the_unfolded_input() -> None:
    """``ConvolutionMM2d.cpp``'s ``finput``: batch x in-channels x kernel area x output area,
    none for a 1x1 kernel at stride 1 without padding."""
    x = torch.empty(64, 1, 64, 64, device="meta")
    w = torch.empty(16, 1, 5, 5, device="meta")
    assert column_buffer(x, w, _conv_args(x, w, padding=2)[2:]) == 64 * 1 * 25 * 64 * 64
    x = torch.empty(64, 32, 16, 16, device="meta")
    w = torch.empty(32, 32, 3, 3, device="meta")
    assert column_buffer(x, w, _conv_args(x, w, padding=1)[2:]) == 64 * 32 * 9 * 16 * 16
    one = torch.empty(10, 64, 1, 1, device="meta")
    assert column_buffer(torch.empty(64, 64, 1, 1, device="meta"), one,
                         _conv_args(x, one)[2:]) == 0  # fmt: skip


def test_only_atens_own_cpu_kernel_holds_a_column_buffer() -> None:
    """The buffer is asked of the backend PyTorch picks here: none on a GPU's rules, none
    where oneDNN runs float32."""
    x = torch.randn(4, 16, 32, 32)
    w = torch.randn(32, 16, 3, 3)
    assert held_beside("cuda", CONV, _conv_args(x, w, 1), None) == []
    backend = torch._C._select_conv_backend(*_conv_args(x, w, 1), None)
    held = [op(*a, **k) for op, a, k in held_beside("cpu", CONV, _conv_args(x, w, 1), None)]
    if backend == torch._C._ConvBackend.Slow2d:
        assert [t.numel() for t in held] == [4 * 16 * 9 * 32 * 32]
    else:
        assert held == []


def test_a_kernel_run_as_on_the_device_writes_the_devices_format() -> None:
    x = torch.empty(8, 32, 26, 26, device="meta")
    w = torch.empty(64, 32, 3, 3, device="meta").contiguous(memory_format=LAST)
    assert as_on_device(CONV, "cuda")(*_conv_args(x, w)).is_contiguous(memory_format=LAST)
    with pytest.raises(ValueError, match="rules must be one of"):
        as_on_device(CONV, "tpu")
