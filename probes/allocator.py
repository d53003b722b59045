"""How the training process's C allocator treats memory freed between iterations.

PyTorch on CPU frees every activation and gradient at the end of an iteration and allocates
them again in the next. With glibc's defaults, blocks above the mmap threshold (128 KB at
first, adapting up to 32 MB) come straight from the kernel and go back to it when freed, so
every iteration touches fresh pages and pays a page fault per 4 KB. Measured on this 2-core
VM (fcn, 2 threads): at batch 256, 186,000 page faults and 287-313 ms per step, against 0
faults and 109-116 ms with freed memory kept for reuse; at batch 64, 43-45 ms against
27-29 ms. The cost of those faults also differs from process to process, which made
identical probes disagree (see ``docs/benchmarks.md``, "Probe noise floor").

:func:`keep_freed_memory` sets glibc's own knobs (``mallopt``) so that the heap serves every
block and keeps what is freed: the effect that jemalloc or tcmalloc give PyTorch when
preloaded, without a library to install. The PyTorch probe and training run both call it
(through :func:`advisor.probes.torch_runner.configure`), so what the probe measures is what
the run gets. TensorFlow keeps its defaults (not measured there).
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_MAX = -4
KEEP_FREE_BYTES = 1 << 30  # give memory back to the kernel only above 1 GiB free at the top
_kept = False


def keep_freed_memory() -> bool:
    """Serve all blocks from glibc's heap and keep freed memory for reuse, for this process.

    Returns whether the setting took effect (False off Linux or with a C library other than
    glibc). Call it before the first large allocation; it never fails.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process already uses
    except (OSError, AttributeError):
        return False
    global _kept
    _kept = bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, KEEP_FREE_BYTES))
    return _kept


def describe() -> str:
    """The allocator setting in force, for a probe's fingerprint."""
    return "glibc heap only, freed memory kept (mallopt)" if _kept else "C library default"
