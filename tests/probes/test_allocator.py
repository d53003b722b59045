"""Freed memory kept for reuse: a torch tensor freed and allocated again costs no new page
faults (with glibc's defaults, every such allocation takes fresh pages from the kernel)."""

from __future__ import annotations

import subprocess
import sys

import pytest

REALLOCATE = """
import resource, sys
import torch
from advisor.probes import allocator
if sys.argv[1] == "keep":
    assert allocator.keep_freed_memory()
faults = []
for _ in range(6):  # like training iterations: activations of several sizes, all freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [torch.ones(n * 1024 * 1024 // 4) for n in (40, 8, 40, 1)]  # MB, pages written
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    del blocks
print(faults[-1])
"""


def _faults_on_reallocation(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", REALLOCATE, mode], capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip())


def _thp_always() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled", encoding="utf-8") as fh:
            return "[always]" in fh.read()
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_reallocated_block_reuses_kept_pages() -> None:
    pages = 89 * 1024 * 1024 // 4096
    default, kept = _faults_on_reallocation("default"), _faults_on_reallocation("keep")
    assert kept < pages // 20 and kept < default  # the freed blocks, reused
    if not _thp_always():  # with 4 KB pages: a fault per page of the 40 MB blocks
        assert default > pages // 2


def test_torch_configure_keeps_freed_memory_and_says_so() -> None:
    from advisor.probes import allocator
    from advisor.probes.torch_runner import configure

    configure(1)
    expected = sys.platform.startswith("linux")
    assert (allocator.describe() == "glibc heap only, freed memory kept (mallopt)") is expected
