"""A plan's predicted memory against the step ``advisor.train`` runs under it (issue #45).

For each workload, at two or more batch sizes, under every plan the search can choose (fp32,
bf16, fp16, accumulation 2 and 4, checkpointed blocks, their combinations; on two CPU
processes over gloo: DDP, ZeRO-1, ZeRO-2 and ZeRO-3, alone and combined), the real step runs
and the allocator's measured peak is set beside the prediction for that plan, per plan:

- **measured**: ``advisor.train``'s own pieces, on real tensors on this CPU: the setup made
  ready by ``advisor.train.plan_step.prepare`` (checkpoint wrappers, ZeroRedundancyOptimizer,
  FSDP2), DDP as ``advisor.train.device.distribute`` builds it, the step of
  ``advisor.probes.plan_step.make_step``; a steady step (two before it), its peak of allocated
  bytes from the profiler's allocator records (``memory_measure.cpu_peak``), the worst rank's.
  As a GPU runs it: the optimizer's multi-tensor implementation, dropout's fused kernel.
- **predicted**: the product's ``advisor.prediction.memory.plan.traced_memory`` for the plan
  at the per-process batch, with the autocast lists of the device it runs on (the CPU's here;
  CUDA's on a GPU), the traced tensors (the context and the allocator's rounding are not in
  the allocated peak); **upper**: that plus the upper terms the product adds for the step's
  own kernels: the trace's measured margin (``memory_priors.TRACE_MARGIN``) and, where the step
  convolves, the convolution library's workspace (``memory.CONV_WORKSPACE_PRIOR``'s high end).

On a GPU (``--device cuda``, one process, the plans on one device) the prediction also holds
the cuBLAS workspaces the product adds (``memory.model.prior_terms``' ``cublas_workspace``: they
are in the allocated peak), the upper estimate their high end; the measurement is
``torch.cuda.max_memory_allocated`` after the allocator's cache is emptied and its peak reset;
each row names its GPU and generation. ``--hold`` runs each step again with the allocator held
to the upper estimate plus the reserve prior's high end (``runs_when_held``): on a roomy GPU
cuDNN's workspace takes free memory it gives up on a full one, so that is the fit decision's
own check. ``--rescore FILES`` scores measured rows kept from an earlier run (a GPU's, say)
by the model as it is now, without running a step.

Goal: median |error| <= 10 % per plan, and no plan under-predicted by more than 5 % at its
upper estimate.

    python benchmarks/plan_conformance.py [--device cpu|cuda] [--hold] [--quick] [--json FILE]
        [--write-docs] [--workloads W,...] [--rescore FILES --gpu NAME,GENERATION]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # examples/ (after an installed advisor)

from plan_conformance_gpu import cuda_run, held_run, this_generation
from plan_conformance_report import markdown, rescore

MIB = 2**20
SINGLE = (
    "",
    "precision=bf16",
    "precision=fp16",
    "accumulation=2",
    "accumulation=4",
    "checkpointing=blocks",
    "precision=bf16,accumulation=2",
    "precision=bf16,checkpointing=blocks",
    "accumulation=4,checkpointing=blocks",
    "precision=bf16,accumulation=2,checkpointing=blocks",
)
SHARDED = (  # on two processes
    "",
    "sharding=optimizer",
    "sharding=gradients",
    "sharding=parameters",
    "precision=bf16,sharding=optimizer",
    "accumulation=2,sharding=parameters",
    "precision=bf16,accumulation=2,checkpointing=blocks,sharding=parameters",
)
# (workload, hyperparameters, per-process batches, plans on two processes too)
CASES: list[tuple[str, dict[str, Any], tuple[int, ...], bool]] = [
    ("fcn", {}, (64, 256), True),
    ("simple-cnn", {}, (64, 256), False),
    ("examples.my_torch_model:build", {}, (64, 256), False),
    ("examples.transformers:gpt2_mini", {}, (4, 16), True),
    ("examples.transformers:bert_base", {"seq_len": 128}, (4, 8), False),
]
# on a GPU the steps are cheap: a larger batch per workload beside the CPU's
GPU_BATCHES = {
    "fcn": (1024,),
    "simple-cnn": (1024,),
    "examples.my_torch_model:build": (1024,),
    "examples.transformers:gpt2_mini": (64,),
    "examples.transformers:bert_base": (32,),
}
QUICK = {"fcn": (64,), "examples.transformers:gpt2_mini": (4,)}
QUICK_PLANS = ("", "precision=bf16,accumulation=2,checkpointing=blocks", "sharding=parameters")
RANKS = 2


def predicted(
    workload: str, hp: dict[str, Any], batch: int, text: str, ranks: int, device: str = "cpu",
    generation: str | None = None,
) -> float:  # fmt: skip
    """The product's prediction of the allocated peak for the plan at ``batch`` per process:
    the traced tensors (the autocast lists of ``device``), and on a GPU the cuBLAS workspaces
    the product adds for a step that multiplies matrices (on ``generation``; default: this
    GPU's)."""
    from advisor.prediction.memory.plan import traced_memory
    from advisor.prediction.step.plan import parse_plan

    rules = "cuda" if device == "cuda" else "cpu"
    memory = traced_memory(workload, hp, batch, parse_plan(text), ranks, rules=rules)
    if not memory.known:
        raise RuntimeError(memory.unknown_reason)
    if device != "cuda":
        return memory.bytes
    return memory.bytes + _cublas(workload, hp, generation)[0]


def _cublas(workload: str, hp: dict[str, Any], generation: str | None) -> tuple[float, float]:
    """The cuBLAS workspaces' (value, high) bytes the product adds for ``workload``'s step."""
    from advisor.prediction.memory.model import MIB as MB
    from advisor.prediction.memory.model import multiplies
    from advisor.prediction.memory.priors import cublas_workspace_mib

    if not multiplies(_trace(workload, hp)):
        return 0.0, 0.0
    (value, _, high), _ = cublas_workspace_mib(generation or this_generation())
    return value * MB, high * MB


_TRACES: dict[str, Any] = {}


def _trace(workload: str, hp: dict[str, Any]) -> Any:
    from advisor.probes.operators.torch_workload import trace_torch_workload

    key = f"{workload}|{sorted(hp.items())}"
    if key not in _TRACES:
        _TRACES[key] = trace_torch_workload(workload, 2, hp, mode="meta")
    return _TRACES[key]


def upper(
    workload: str, hp: dict[str, Any], tensors: float, device: str = "cpu",
    generation: str | None = None,
) -> float:  # fmt: skip
    """``tensors`` (the traced tensors) plus the upper terms the product adds for the step's
    own kernels: the trace's margin, on a GPU the cuBLAS workspaces' high end and, where the
    step convolves, cuDNN's workspace prior's high end."""
    from advisor.prediction.memory.model import CONV_WORKSPACE_PRIOR
    from advisor.prediction.memory.priors import trace_margin

    convolves = any(o.kind == "conv" for o in _trace(workload, hp).operators)
    workspace = CONV_WORKSPACE_PRIOR[2] if convolves else 0.0
    cublas = (0.0, 0.0)
    if device == "cuda":
        cublas = _cublas(workload, hp, generation)
    tensors -= cublas[0]
    return tensors * (1 + trace_margin("torch")[0]) + workspace + cublas[1]


def measured(
    workload: str, hp: dict[str, Any], batch: int, text: str, ranks: int, device: str = "cpu"
) -> float:
    """The allocator's peak of the real steady step, the worst process's."""
    if device == "cuda":
        return cuda_run(workload, hp, batch, text)
    if ranks == 1:
        return _run(0, 1, workload, hp, batch, text)
    import tempfile

    import torch.multiprocessing as mp

    from advisor.train.device import free_port

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(free_port())
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_rank, args=(ranks, workload, hp, batch, text, tmp), nprocs=ranks, join=True)
        return max(float(Path(tmp, f"{r}").read_text()) for r in range(ranks))


def _rank(rank: int, ranks: int, workload: str, hp: dict[str, Any], batch: int, text: str,
          out: str) -> None:  # fmt: skip
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    try:
        Path(out, f"{rank}").write_text(str(_run(rank, ranks, workload, hp, batch, text)))
        dist.barrier()  # no rank leaves the group while another still talks in it (a gloo
        # thread left behind aborted a rank at exit now and then, as advisor.train's did)
    finally:
        dist.destroy_process_group()


def _run(rank: int, ranks: int, workload: str, hp: dict[str, Any], batch: int, text: str) -> int:
    """One process: ``advisor.train``'s setup and step under the plan, its steady peak."""
    from advisor.probes.operators.cuda_paths import cuda_dropout
    from advisor.probes.operators.optimizer import cuda_default_foreach
    from advisor.probes.plan_step import make_step
    from advisor.probes.sharding import uses_fsdp
    from advisor.probes.torch_loop import build_setup, split_batch
    from memory_measure import cpu_peak

    from advisor.prediction.step.plan import parse_plan
    from advisor.train.device import DevicePlan, distribute
    from advisor.train.plan_step import prepare

    if os.environ.get(NO_MKLDNN) == "1":
        import torch

        torch.backends.mkldnn.enabled = False
    plan = parse_plan(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setup, _, _ = build_setup(workload, batch * ranks, batch * ranks, 8, 0, hp)
    if ranks > 1:
        device = DevicePlan("cpu", ranks, "benchmark")
        setup = distribute(setup, device, rank, 0, wrap=not uses_fsdp(plan.sharding))
    setup = prepare(setup, plan, distributed=ranks > 1)
    x, y = split_batch(next(iter(setup.train_loader)))
    step = make_step(plan, "cpu")
    setup.model.train()
    with cuda_dropout(), cuda_default_foreach(getattr(setup.optimizer, "optim", setup.optimizer)):
        return cpu_peak(lambda: step(setup, (x, y), "cpu"), setup, (x, y), warm_up=2)


def run_case(
    workload: str, hp: dict[str, Any], batch: int, text: str, ranks: int, device: str = "cpu",
    hold: bool = False,
) -> dict[str, Any]:  # fmt: skip
    start = time.perf_counter()
    meas = measured(workload, hp, batch, text, ranks, device)
    row = {
        "workload": workload, "hp": hp, "batch": batch, "plan": text or "fp32",
        "processes": ranks, "device": device, "measured_mib": meas / MIB,
    }  # fmt: skip
    if device == "cuda":
        import torch

        row["gpu"] = torch.cuda.get_device_name()
        row["generation"] = this_generation()
    else:
        row |= cpu_paths()
    score(row)
    if hold and device == "cuda":  # the allocator held to the upper estimate and its reserve
        from advisor.prediction.memory.priors import reserve_fraction

        limit = row["upper_mib"] * MIB * (1 + reserve_fraction("torch")[2])
        row["runs_when_held"] = held_run(workload, hp, batch, text, limit)
    gc.collect()
    row["seconds"] = time.perf_counter() - start
    return row


NO_MKLDNN = "PLAN_CONFORMANCE_NO_MKLDNN"  # --no-mkldnn, for every process of a case


def cpu_paths() -> dict[str, Any]:
    """Which CPU ran the steps and which convolution kernels it takes: oneDNN (``mkldnn``)
    takes float32 convolutions, and bf16/fp16 ones only where the CPU computes in them
    (``avx512_bf16``, AMX); elsewhere ATen's own kernels. Each keeps buffers of its own
    beside the tensors a trace sees (docs/benchmarks.md), so a row says which it was."""
    import torch

    flags: set[str] = set()
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "flags":
                flags = set(value.split())
            elif key.strip() == "model name":
                model = value.strip()
    half = sorted(flags & {"avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16"})
    mkldnn = bool(torch.backends.mkldnn.enabled) and os.environ.get(NO_MKLDNN) != "1"
    return {"cpu": model, "cpu_half": half, "mkldnn": mkldnn}


def score(row: dict[str, Any]) -> dict[str, Any]:
    """``row``'s prediction, upper estimate and errors by the model as it is now (its
    measurement kept): a GPU's rows are rescored here without the GPU."""
    text = "" if row["plan"] == "fp32" else row["plan"]
    args = (row["workload"], row.get("hp", {}), row["batch"], text, row["processes"])
    generation = row.get("generation")
    pred = predicted(*args, row["device"], generation)
    top = upper(row["workload"], row.get("hp", {}), pred, row["device"], generation)
    meas = row["measured_mib"] * MIB
    row.update(predicted_mib=pred / MIB, upper_mib=top / MIB, error=(pred - meas) / meas,
               upper_error=(top - meas) / meas)  # fmt: skip
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two workloads, three plans")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the real steps run (cuda: one process per plan)")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--workloads", default=None,
                        help="comma-separated workloads to run (default: all of CASES)")  # fmt: skip
    parser.add_argument("--hold", action="store_true",
                        help="--device cuda: also run each step with the allocator held to its "
                        "upper estimate plus the reserve prior's high end (does it fit?)")  # fmt: skip
    parser.add_argument("--rescore", default=None, metavar="FILES",
                        help="comma-separated JSON files of measured rows (e.g. a GPU's): "
                        "score them by the model as it is now, run nothing")  # fmt: skip
    parser.add_argument("--gpu", default=None, metavar="NAME,GENERATION",
                        help="--rescore: the GPU rows that do not name theirs ran on")  # fmt: skip
    parser.add_argument("--no-mkldnn", action="store_true",
                        help="--device cpu: the real steps without oneDNN (ATen's own kernels), "
                        "to see which convolution path holds what")  # fmt: skip
    args = parser.parse_args(argv)
    if args.no_mkldnn:  # in the gloo processes (``_run``), and here: the trace asks PyTorch
        os.environ[NO_MKLDNN] = "1"  # which kernels this CPU takes (``kernel_memory``)
        import torch

        torch.backends.mkldnn.enabled = False
    if args.rescore:
        return rescore(args, {w: hp for w, hp, _, _ in CASES}, score)
    from advisor.prediction.step.plan import parse_plan

    chosen = None if args.workloads is None else set(args.workloads.split(","))
    rows = []
    for workload, hp, batches, sharded in CASES:
        if (args.quick and workload not in QUICK) or (chosen and workload not in chosen):
            continue
        runs = [(t, 1) for t in SINGLE]
        if sharded and args.device == "cpu":  # two processes over gloo; one GPU runs one
            runs += [(t, RANKS) for t in SHARDED]
        for text, ranks in runs:
            if args.quick and text not in QUICK_PLANS:
                continue
            chosen_batches = QUICK.get(workload, batches) if args.quick else batches
            if args.device == "cuda" and not args.quick:
                chosen_batches = batches + GPU_BATCHES.get(workload, ())
            for batch in chosen_batches:
                if parse_plan(text).accumulation > batch:
                    continue  # the search never splits a batch into more micro-batches than samples
                try:
                    row = run_case(workload, hp, batch, text, ranks, args.device, args.hold)
                except Exception as exc:  # a case that breaks is listed; the others still run
                    print(f"{workload} b{batch} {text or 'fp32'} x{ranks}: FAILED {exc!r}",
                          file=sys.stderr)  # fmt: skip
                    continue
                print(f"{workload} b{batch} {row['plan']} x{ranks}: predicted "
                      f"{row['predicted_mib']:.1f} MiB, measured {row['measured_mib']:.1f} "
                      f"({row['error']:+.1%}) [{row['seconds']:.0f} s]", file=sys.stderr)  # fmt: skip
                rows.append(row)
                if args.json is not None:  # kept as it goes: a long run's rows survive a stop
                    args.json.write_text(json.dumps(rows, indent=1))
    command = "python benchmarks/plan_conformance.py" + (" --quick" if args.quick else "")
    command += f" --workloads {args.workloads}" if args.workloads else ""
    command += " --device cuda" if args.device == "cuda" else ""
    command += " --no-mkldnn" if args.no_mkldnn else ""
    from docs_section import publish

    paths = cpu_paths()
    where = (f"this machine's CPU, {paths['cpu'] or 'unnamed'}, "
             f"{'/'.join(paths['cpu_half']) or 'no bf16 or fp16 instructions'}, oneDNN "
             f"{'on' if paths['mkldnn'] else 'off'}")  # fmt: skip
    section = "## Plans' memory against the step that runs"
    if args.device == "cuda":
        import torch

        where = f"one {torch.cuda.get_device_name()}, torch {torch.__version__}"
        section += " on a GPU"
    publish(section, markdown(rows, command, where),
            args.write_docs, rows, args.json)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
