"""What autocast's weight cache holds through a checkpointed forward pass, on real tensors
(stop 64: ``probes.plan_step`` turns the cache off under checkpointed blocks).

Eight blocks of two 2,048-wide linear layers (512 MiB of bf16 weight copies), each wrapped by
``torch.utils.checkpoint`` (non-reentrant, as ``advisor.train``'s ``checkpoint_wrapper``), run
forward under ``torch.autocast("cpu", bfloat16)`` with the cache on and off; the process's
resident memory after the forward pass, less before it, is what the forward pass holds. The
cache is device-independent code (``at::autocast::cached_cast``), so CUDA's autocast keeps the
same copies. Each setting runs twice, alternating.

    python benchmarks/autocast_cache.py
"""

from __future__ import annotations

import gc
import os

WIDTH, BLOCKS = 2048, 8


def held_mib(cache: bool, blocks: object, x: object) -> float:
    """Resident MiB the forward pass holds with autocast's cache ``cache``."""
    import psutil
    import torch
    from torch.utils.checkpoint import checkpoint

    gc.collect()
    before = psutil.Process(os.getpid()).memory_info().rss
    with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=cache):
        h = x
        for block in blocks:  # type: ignore[attr-defined]
            h = checkpoint(block, h, use_reentrant=False)
        after = psutil.Process(os.getpid()).memory_info().rss
    del h
    return (after - before) / 2**20


def main() -> None:
    import torch

    torch.manual_seed(0)
    blocks = torch.nn.ModuleList(
        torch.nn.Sequential(torch.nn.Linear(WIDTH, 4 * WIDTH), torch.nn.GELU(),
                            torch.nn.Linear(4 * WIDTH, WIDTH))
        for _ in range(BLOCKS)
    )  # fmt: skip
    x = torch.randn(4, 32, WIDTH)
    copies = sum(p.numel() for p in blocks.parameters()) * 2 / 2**20
    print(f"{BLOCKS} checkpointed blocks, bf16 weight copies {copies:.0f} MiB")
    for cache in (True, False, True, False):
        print(f"cache {'on ' if cache else 'off'}: the forward pass holds "
              f"{held_mib(cache, blocks, x):5.0f} MiB")  # fmt: skip


if __name__ == "__main__":
    main()
