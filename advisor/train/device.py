"""Which device ``advisor.train`` trains on, and data-parallel training over several GPUs.

``--device auto`` (the default) takes CUDA when PyTorch sees a GPU, else the CPU; ``cuda``
insists on a GPU; ``tpu`` is refused with the fix (the advisor image has no PyTorch/XLA, and
the shared training loop does not drive XLA devices). With several visible GPUs, training
runs one process per GPU under ``torch.distributed`` with ``DistributedDataParallel`` and a
``DistributedSampler``: the global batch ``B`` is split as ``B / n`` per GPU, as the performance
model assumes (``advisor.prediction.timing.accel``). Started by ``torchrun`` (one machine or
several: ``advisor.train.launch``), each process is one rank of the launcher's world: the
plan's ``count`` is every process of every machine, ``nodes`` the machines.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from advisor.errors import AdvisorError

DEVICES = ("auto", "cpu", "cuda", "tpu")


@dataclass(frozen=True)
class DevicePlan:
    """Where training runs: ``kind`` (cpu, cuda) on ``count`` devices (``count`` > 1
    means one DistributedDataParallel process per GPU) over ``nodes`` machines, and why."""

    kind: str
    count: int
    reason: str
    nodes: int = 1
    launched: bool = False  # started by torchrun (or Azure ML): this process is one rank

    @property
    def distributed(self) -> bool:
        return self.count > 1

    @property
    def per_node(self) -> int:
        """Processes (devices) on each machine."""
        return max(1, self.count // max(self.nodes, 1))

    def describe(self) -> str:
        many = f" x{self.count} (DistributedDataParallel)" if self.distributed else ""
        where = f" on {self.nodes} machines" if self.nodes > 1 else ""
        return f"{self.kind}{many}{where} ({self.reason})"


def choose_device(requested: str, cuda_count: int, xla: bool) -> DevicePlan:
    """The plan for ``--device requested`` given ``cuda_count`` visible GPUs and whether
    PyTorch/XLA is importable. Raises ``AdvisorError`` with the fix when it cannot be met."""
    if requested not in DEVICES:
        raise AdvisorError(
            f"--device {requested!r} is not a device advisor.train knows.",
            f"use one of {', '.join(DEVICES)}.",
        )
    if requested == "cpu":
        return DevicePlan("cpu", 1, "asked for")
    if requested == "tpu":
        if not xla:
            raise AdvisorError(
                "--device tpu needs PyTorch/XLA (torch_xla), which this image does not include.",
                "train on a GPU machine type, or build the image from a PyTorch/XLA base.",
            )
        # torch_xla is here, but the shared training loop (advisor.probes.torch_loop) does not
        # mark XLA steps (xm.mark_step) nor time them: refuse rather than train wrongly.
        raise AdvisorError(
            "--device tpu: advisor.train's training loop does not drive PyTorch/XLA yet.",
            "train on a GPU machine type (--device cuda).",
        )
    if cuda_count == 0:
        if requested == "cuda":
            raise AdvisorError(
                "--device cuda was asked for, but PyTorch sees no CUDA GPU here.",
                "run on a GPU machine with the CUDA image (docker/Dockerfile), or pass --device cpu.",
            )
        return DevicePlan("cpu", 1, "auto: no CUDA GPU visible")
    why = "asked for" if requested == "cuda" else "auto: CUDA available"
    return DevicePlan("cuda", cuda_count, f"{why}, {cuda_count} visible")


def detect(requested: str) -> DevicePlan:
    """``choose_device`` for this machine (imports torch)."""
    import importlib.util

    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return choose_device(requested, count, importlib.util.find_spec("torch_xla") is not None)


def joined(requested: str, ranks: Any) -> DevicePlan:
    """The plan of one process ``torchrun`` started (``advisor.train.launch.Ranks``): the
    device ``choose_device`` picks, over the launcher's whole world."""
    one = detect(requested)
    if one.kind == "cuda" and ranks.local_world > one.count:
        raise AdvisorError(
            f"torchrun starts {ranks.local_world} processes on this machine but PyTorch sees "
            f"{one.count} GPUs.",
            f"start at most {one.count} processes per machine (--nproc-per-node).",
        )
    why = f"torchrun: rank {ranks.rank} of {ranks.world}"
    return DevicePlan(one.kind, ranks.world, why, nodes=ranks.nodes, launched=True)


def torch_device(plan: DevicePlan, rank: int = 0) -> Any:
    """The ``torch.device`` of ``rank`` under ``plan`` (its GPU on its own machine)."""
    import torch

    if plan.kind == "cuda":
        return torch.device("cuda", rank % plan.per_node)
    return torch.device("cpu")


def spawn(worker: Any, plan: DevicePlan, *args: Any) -> None:
    """Run ``worker(rank, plan, *args)`` once per GPU (``torch.multiprocessing.spawn``) with a
    local process group rendezvous; returns when every rank has finished."""
    import torch.multiprocessing as mp

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    mp.spawn(worker, args=(plan, *args), nprocs=plan.count, join=True)


def init_rank(rank: int, plan: DevicePlan) -> None:
    """Join the process group as ``rank`` (NCCL on CUDA) and pin the rank's GPU."""
    import torch
    import torch.distributed as dist

    if plan.kind == "cuda":
        torch.cuda.set_device(rank % plan.per_node)
    backend = "nccl" if plan.kind == "cuda" else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=plan.count)


def mesh(plan: DevicePlan, replicate: bool) -> Any:
    """The device mesh FSDP2 shards over: every process (1-D), or with ``replicate`` on
    several machines (HSDP) machines x processes per machine, ``("replicate", "shard")``:
    torch's ``init_device_mesh`` puts consecutive ranks (one machine's) in one shard group."""
    from torch.distributed.device_mesh import init_device_mesh

    if replicate and plan.nodes > 1:
        return init_device_mesh(
            plan.kind, (plan.nodes, plan.per_node), mesh_dim_names=("replicate", "shard")
        )
    return init_device_mesh(plan.kind, (plan.count,))


def distribute(setup: Any, plan: DevicePlan, rank: int, seed: int, wrap: bool = True) -> Any:
    """``setup`` for one rank: the model on the rank's device, in ``DistributedDataParallel``
    unless ``wrap`` is False (FSDP shards it instead: ``advisor.probes.sharding``), and the
    training data sharded by a ``DistributedSampler`` at the per-device batch size.

    DDP runs with ``gradient_as_bucket_view=True``: the gradients are views into its
    all-reduce buckets, not a second flat copy of them (issue #45: by default DDP keeps both,
    one more gradient-sized buffer per GPU). The buckets live for the whole run, so the
    gradients' bytes are held through every forward pass too; the memory model traces it so
    (``advisor.probes.operators.plan_peak``)."""
    import dataclasses

    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler

    device = torch_device(plan, rank)
    model = setup.model.to(device)
    ids = [rank] if plan.kind == "cuda" else None
    loader = setup.train_loader
    per_device = max(1, int(loader.batch_size or 1) // plan.count)
    sampler: DistributedSampler[Any] = DistributedSampler(
        loader.dataset, num_replicas=plan.count, rank=rank, shuffle=True, seed=seed
    )
    return dataclasses.replace(
        setup,
        model=(
            DistributedDataParallel(model, device_ids=ids, gradient_as_bucket_view=True)
            if wrap
            else model
        ),
        train_loader=DataLoader(loader.dataset, batch_size=per_device, sampler=sampler),
    )


def free_port() -> int:
    """A TCP port free on this host now (the rendezvous of a local process group)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
