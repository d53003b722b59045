"""How many kernels CUDA launches for one multi-tensor (``_foreach_*``, fused optimizer) op.

PyTorch's CUDA ``multi_tensor_apply`` (``aten/src/ATen/native/cuda/MultiTensorApply.cuh``,
shipped with torch's headers as ``torch/include/ATen/native/cuda/MultiTensorApply.cuh``; read
from torch 2.13.0) walks the tensor lists tensor by tensor and chunk by chunk
(``kChunkSize`` = 65,536 elements of the first list's tensor per thread block) and launches one
kernel whenever the launch's metadata is full: ``depth_to_max_tensors[depth - 1]`` tensors
(whose last chunk is in) or ``depth_to_max_blocks[depth - 1]`` blocks, and a last one for the
rest. A tensor cut by a full launch carries over as the next launch's first tensor. Empty
tensors are skipped. ``depth`` is the number of tensor lists the kernel takes (inputs and,
for an out-of-place op, the output list); a list of Scalars (one per tensor) takes room in the
metadata, hence the separate ``depth_to_max_tensors_scalarlist``.

The limits depend on the CUDA version torch was built with (the kernel-argument space):

=============================  =======================  ======================  =========
build                          max tensors, depth 1..5  scalar-list variant     max blocks
=============================  =======================  ======================  =========
CUDA < 13 (4 KB arguments)     110, 64, 48, 36, 30      96, 64, 48, 36, 30      320
CUDA >= 13 (32 KB arguments)   770, 448, 336, 252, 210  672, 448, 336, 252, 210  2240
=============================  =======================  ======================  =========

The default is the CUDA 12 table (the builds the GPU kernel measurements were taken with).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

CHUNK_SIZE = 65_536  # kChunkSize: elements per thread block
_MAX_TENSORS = {12: (110, 64, 48, 36, 30), 13: (770, 448, 336, 252, 210)}
_MAX_TENSORS_SCALARLIST = {12: (96, 64, 48, 36, 30), 13: (672, 448, 336, 252, 210)}
_MAX_BLOCKS = {12: 320, 13: 2240}


@dataclass(frozen=True)
class Launch:
    """One ``multi_tensor_apply_kernel`` launch: ``tensors`` tensors (or parts of them),
    ``blocks`` thread blocks, ``elements`` elements of the first list processed."""

    tensors: int
    blocks: int
    elements: int


def launches(
    numels: Iterable[int], depth: int, scalar_list: bool = False, cuda_major: int = 12
) -> list[Launch]:
    """The launches ``multi_tensor_apply<depth>`` makes for tensors of ``numels`` elements
    (the same walk as the CUDA source; see the module docstring for the limits)."""
    if not 1 <= depth <= 5:
        raise ValueError(f"depth must be 1..5 (tensor lists of a multi-tensor op), got {depth}")
    table = _MAX_TENSORS_SCALARLIST if scalar_list else _MAX_TENSORS
    key = 13 if cuda_major >= 13 else 12
    max_tensors, max_blocks = table[key][depth - 1], _MAX_BLOCKS[key]
    out: list[Launch] = []
    tensors = blocks = elements = 0
    for numel in numels:
        if numel <= 0:
            continue
        tensors += 1
        chunks = -(-numel // CHUNK_SIZE)
        for chunk in range(chunks):
            blocks += 1
            elements += min(CHUNK_SIZE, numel - chunk * CHUNK_SIZE)
            last = chunk == chunks - 1
            if (tensors == max_tensors and last) or blocks == max_blocks:
                out.append(Launch(tensors, blocks, elements))
                blocks = elements = 0
                tensors = 0 if last else 1  # a cut tensor continues in the next launch
    if blocks:
        out.append(Launch(tensors, blocks, elements))
    return out
