"""Data parallel's fixed cost per step, measured here with two CPU processes (issue #35).

Two processes on this machine (``torch.distributed`` with ``gloo``) train a small network of
the issue's size (an MLP of 8 layers of 128: 133k parameters in 17 tensors) at batch 8 per
process, so that the compute of a step is small beside the fixed cost; each step timed:

- ``plain``: each process trains its own copy, no synchronisation (the same CPU contention);
- ``ddp, 1 bucket``: ``DistributedDataParallel`` with one gradient bucket;
- ``ddp, one bucket per parameter``: ``bucket_cap_mb`` small enough that every parameter
  tensor is its own bucket.

The difference ddp - plain is what one replica pays per step for data parallelism on this
host: DDP's hooks and bucket copies plus gloo's loopback all-reduce of each bucket; the slope
over the bucket count is the cost per bucket. These are host (CPU) figures: the GPU's
collective latency per hop (NCCL over NVLink or PCIe) cannot be measured here and stays a
prior in ``advisor.prediction.timing.constants``. Each run's step time is its 10th percentile
(this machine is shared and loaded: the low quantile is the step without interference); the
figures are medians over the interleaved runs with their interquartile range.

    python benchmarks/ddp_overhead.py [--steps 200] [--repeats 5] [--write-docs]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SECTION = "## Data parallel's fixed cost per step, two CPU processes with gloo (issue #35)"
BATCH = 8  # per process: small, so the fixed cost is visible beside the step
LAYERS, WIDTH = 8, 128


def _mlp() -> Any:
    """A small network of the issue's size: 8 linear layers of 128 (133k parameters, 16
    parameter tensors), so a step takes well under a millisecond of compute."""
    from torch import nn

    layers: list[Any] = []
    for _ in range(LAYERS):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(WIDTH, 2))


def _low(times: list[float]) -> float:
    """The 10th percentile of step times: on a shared, loaded machine the low quantile is the
    step without other processes' interference (the median carries the load)."""
    return statistics.quantiles(times, n=10)[0]


def _worker(rank: int, world: int, steps: int, repeats: int, init: str, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(0)
    models: dict[str, Any] = {
        "plain": _mlp(),
        "ddp1": DDP(_mlp(), bucket_cap_mb=100),
        "ddpn": DDP(_mlp(), bucket_cap_mb=1e-6),
    }
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for k, m in models.items()}
    x, y = torch.randn(BATCH, WIDTH), torch.randint(0, 2, (BATCH,))
    loss_fn = torch.nn.CrossEntropyLoss()
    medians: dict[str, list[float]] = {k: [] for k in models}
    for _ in range(repeats):
        for mode, model in models.items():
            times = []
            dist.barrier()
            for _ in range(steps):
                t0 = time.perf_counter()
                opts[mode].zero_grad(set_to_none=True)
                loss_fn(model(x), y).backward()
                opts[mode].step()
                times.append(time.perf_counter() - t0)
            medians[mode].append(_low(times[steps // 5 :]))
    if rank == 0:
        buckets = {k: len(m.reducer._get_zeros_like_grad_buckets()) for k, m in models.items()
                   if k != "plain"}  # fmt: skip
        Path(out).write_text(json.dumps({"medians": medians, "buckets": buckets}))
    dist.destroy_process_group()


def measure(steps: int, repeats: int, world: int = 2) -> dict[str, Any]:
    """Per-step overhead of DDP with one bucket and with one bucket per parameter, and the
    cost per bucket: ``repeats`` interleaved runs of ``steps`` steps, rank 0's medians."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        init = f"file://{os.path.join(tmp, 'rendezvous')}"
        mp.spawn(_worker, args=(world, steps, repeats, init, out), nprocs=world, join=True)
        found = json.loads(Path(out).read_text())
    per, buckets = found["medians"], found["buckets"]
    one = [d - p for d, p in zip(per["ddp1"], per["plain"], strict=True)]
    many = [d - p for d, p in zip(per["ddpn"], per["plain"], strict=True)]
    extra = buckets["ddpn"] - buckets["ddp1"]
    per_bucket = [(m - o) / extra for m, o in zip(many, one, strict=True)] if extra else []
    return {
        "plain": per["plain"],
        "overhead_one_bucket": one,
        "overhead_many": many,
        "buckets": buckets,
        "per_bucket": per_bucket,
    }


def _iqr(values: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def render(r: dict[str, Any], r1: dict[str, Any], steps: int, repeats: int) -> str:
    def fmt(values: list[float]) -> str:
        lo, hi = _iqr(values) if len(values) >= 2 else (values[0], values[0])
        return f"{statistics.median(values) * 1e3:.2f} ms (IQR {lo * 1e3:.2f}-{hi * 1e3:.2f})"

    b = r["buckets"]
    lines = [
        f"Command: `python benchmarks/ddp_overhead.py --steps {steps} --repeats {repeats} "
        "--write-docs` (2 processes, gloo, this shared 2-core machine; an MLP of 8 x 128, "
        "133k parameters, batch 8 per process).",
        "",
        "One process (world size 1: DDP's hooks, bucket copies and a trivial all-reduce, no "
        "waiting for another replica), the framework's own cost:",
        "",
        f"- plain step: {fmt(r1['plain'])}",
        f"- DDP's cost per step, {r1['buckets']['ddp1']} bucket: {fmt(r1['overhead_one_bucket'])}",
        f"- DDP's cost per step, {r1['buckets']['ddpn']} buckets: {fmt(r1['overhead_many'])}",
        f"- per extra bucket: {fmt(r1['per_bucket'])}",
        "",
        "Two processes (gloo's loopback all-reduce and the wait for the other replica too; "
        "this machine's two cores are shared, so these are upper figures):",
        "",
        f"- plain step (no synchronisation): {fmt(r['plain'])}",
        f"- DDP's cost per step and replica, {b['ddp1']} bucket: {fmt(r['overhead_one_bucket'])}",
        f"- DDP's cost per step and replica, {b['ddpn']} buckets: {fmt(r['overhead_many'])}",
    ]
    if r["per_bucket"]:
        lines.append(f"- per extra bucket: {fmt(r['per_bucket'])}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    one = measure(args.steps, args.repeats, world=1)
    text = render(measure(args.steps, args.repeats), one, args.steps, args.repeats)
    print(text)
    if args.write_docs:
        from docs_section import write_section

        write_section(SECTION, text)


if __name__ == "__main__":
    main()
