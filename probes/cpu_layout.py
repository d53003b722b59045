"""Find CPU kernels whose speed depends on the data, so a probe's timings would drift in training.

Max pooling of a channels-first (NCHW) tensor on CPU is a scalar loop with a data-dependent
branch: on a 64x16x64x64 input it took 8.2 ms with 50 % zeros and 3.3 ms with 97 % zeros,
against 1.07 and 1.04 ms in channels-last layout. As a network's ReLUs die during training its
pooling inputs fill with zeros, and iterations speed up: an NCHW fcn ran 13.5-18.7 % faster
than its first 10 iterations (docs/benchmarks.md). A probe sees only those first iterations,
so it says so. :class:`NchwPoolingCheck` is a ``TorchDispatchMode`` that watches one training
step for such calls. Importing this module imports torch.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_aten = torch.ops.aten
_POOLING = (_aten.max_pool2d_with_indices.default, _aten.max_pool2d.default)

NCHW_POOLING_WARNING = (
    "max pooling runs on channels-first (NCHW) CPU tensors, whose speed depends on the "
    "activations: training may run faster than probed as ReLUs die (an NCHW fcn ran up to "
    "19 % faster); model.to(memory_format=torch.channels_last) removes this and is faster"
)


class NchwPoolingCheck(TorchDispatchMode):
    """Records whether any 2-D max pooling ran on a channels-first CPU tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in _POOLING and args:
            x = args[0]
            if (
                isinstance(x, torch.Tensor)
                and x.device.type == "cpu"
                and x.dim() == 4
                and x.shape[1] > 1
                and not x.is_contiguous(memory_format=torch.channels_last)
            ):
                self.calls += 1
        return func(*args, **(kwargs or {}))

    def warnings(self) -> tuple[str, ...]:
        """The warning to attach to the probe, if any call was seen."""
        return (NCHW_POOLING_WARNING,) if self.calls else ()
