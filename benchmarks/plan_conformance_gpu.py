"""The plan conformance benchmark's steps on a GPU (``benchmarks/plan_conformance.py
--device cuda``): ``advisor.train``'s setup and step under a plan on the device, the
allocator's peak of a steady step, the step run with the allocator held to a limit
(``--hold``), and this GPU's generation as the memory model names it."""

from __future__ import annotations

import warnings
from typing import Any


def this_generation() -> str | None:
    """This GPU's generation as the catalog names it (only what the cuBLAS term tells apart)."""
    import torch

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return "Hopper" if (major, minor) == (9, 0) else f"sm_{major}{minor}"


def held_run(workload: str, hp: dict[str, Any], batch: int, text: str, limit: float) -> bool:
    """Whether the step runs on a GPU whose caching allocator may hold at most ``limit``
    bytes (``torch.cuda.set_per_process_memory_fraction``): the fit decision checked on a
    full GPU, where cuDNN's elastic workspace must give way (``--hold``)."""
    import torch

    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total))
    try:
        cuda_run(workload, hp, batch, text)
        return True
    except torch.OutOfMemoryError:
        return False
    finally:
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction(1.0)


def cuda_run(workload: str, hp: dict[str, Any], batch: int, text: str) -> int:
    """On the GPU: ``advisor.train``'s setup and step under the plan, the allocator's peak of
    a steady step (two before it)."""
    ready = device_step(workload, hp, batch, text, "cuda")
    for _ in range(2):
        ready[1](*ready[0])
    return cuda_peak(*ready)


def device_step(
    workload: str, hp: dict[str, Any], batch: int, text: str, device: str
) -> tuple[tuple[Any, Any, Any], Any]:
    """``advisor.train``'s setup under the plan on ``device`` and its step, ready to call:
    ``((setup, batch, device), step)``."""
    import torch
    from advisor.probes.plan_step import make_step
    from advisor.probes.torch_loop import build_setup, split_batch, to_device

    from advisor.prediction.step.plan import parse_plan
    from advisor.train.plan_step import prepare

    plan = parse_plan(text)
    dev = torch.device(device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setup, _, _ = build_setup(workload, batch, batch, 8, 0, hp)
    setup.model.to(dev)
    setup = prepare(setup, plan)
    x, y = to_device(split_batch(next(iter(setup.train_loader))), dev)
    setup.model.train()
    return (setup, (x, y), dev), make_step(plan, device)


def cuda_peak(args: tuple[Any, Any, Any], step: Any) -> int:
    """The allocator's peak of one more ``step(*args)``, its cache emptied and its peak reset
    first (the last step's gradients released, as the step itself does on entry). What an
    earlier case left cached is emptied here, so cases need not free after themselves."""
    import torch

    args[0].optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    step(*args)
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated())
