"""The library workspaces in a GPU step's allocated peak, and cuDNN's workspace under a cap (issue #45).

On one GPU, for convolution models under fp32 (TF32 convolutions, PyTorch's default) and
bf16, at several batches, each setting in a fresh process (cuDNN reads its environment once):

- the step ``advisor.train`` runs (``plan_conformance_gpu.device_step``), its allocated peak
  (``torch.cuda.max_memory_allocated`` after the cache is emptied and the peak reset) and its
  steady step time (median of 10 timed steps after 3, ``torch.cuda.synchronize`` around each);
- the excess over the traced tensors (``memory.plan.traced_memory`` with CUDA's autocast
  lists): what cuBLAS's and cuDNN's workspaces add;
- the same with ``CUDNN_CONV_WSCAP_DBG`` (cuDNN's cap on the convolution workspace its
  heuristics may choose, MiB) set, to see whether a cap bounds the workspace and what it
  costs in step time.

    python benchmarks/conv_workspace.py [--device cuda|cpu] [--caps none,64,512] [--quick] [--json FILE]

``--device cpu`` runs the same code path on the CPU (a smoke test: no workspaces there).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # examples/ (after an installed advisor)

MIB = 2**20
CASES = (  # (workload, batches)
    ("fcn", (128, 256, 1024)),
    ("simple-cnn", (256, 1024)),
    ("resnet50", (64, 256)),
)
QUICK = (("fcn", (128,)),)
PLANS = ("", "precision=bf16")


def measure(workload: str, batch: int, text: str, device: str) -> dict[str, float]:
    """The allocated peak of a steady step and its median time, in this process."""
    import torch
    from plan_conformance_gpu import cuda_peak, device_step

    args, step = device_step(workload, {}, batch, text, device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(3):
        step(*args)
    times = []
    for _ in range(10):
        sync()
        start = time.perf_counter()
        step(*args)
        sync()
        times.append(time.perf_counter() - start)
    peak = float(cuda_peak(args, step)) if device == "cuda" else 0.0
    return {"measured_mib": peak / MIB, "step_ms": statistics.median(times) * 1e3}


def child(device: str, quick: bool = False) -> int:
    """Every case in this process (its environment holds the cap), one JSON line each."""
    for workload, batches in QUICK if quick else CASES:
        for text in PLANS:
            for batch in batches:
                try:
                    row = measure(workload, batch, text, device)
                except Exception as exc:  # an out-of-memory or a failed case is listed
                    row = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                row.update(workload=workload, batch=batch, plan=text or "fp32")
                print(json.dumps(row), flush=True)
    return 0


def run_cap(cap: str, device: str, quick: bool = False) -> list[dict[str, Any]]:
    env = dict(os.environ)
    env.pop("CUDNN_CONV_WSCAP_DBG", None)
    if cap != "none":
        env["CUDNN_CONV_WSCAP_DBG"] = cap
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--device", device] + ["--quick"] * quick,
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode:
        print(out.stderr[-2000:], file=sys.stderr)
    for row in rows:
        row["cap_mib"] = cap
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--caps", default="none,64,512", help="CUDNN_CONV_WSCAP_DBG values, MiB")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="fcn at batch 128 only")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.device, args.quick)
    from plan_conformance import predicted

    rows: list[dict[str, Any]] = []
    for cap in args.caps.split(","):
        rows += run_cap(cap, args.device, args.quick)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    traced: dict[tuple[str, int, str], float] = {}
    for row in rows:
        key = (row["workload"], row["batch"], row["plan"])
        if key not in traced:
            plan = "" if row["plan"] == "fp32" else row["plan"]
            traced[key] = predicted(key[0], {}, key[1], plan, 1, args.device) / MIB
        row["traced_mib"] = traced[key]
        if "measured_mib" in row:
            row["excess_mib"] = row["measured_mib"] - row["traced_mib"]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(
        "| workload | batch | plan | cap MiB | traced MiB | measured MiB | excess MiB | step ms |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['workload']} | {r['batch']} | {r['plan']} | {r['cap_mib']} | "
                  f"{r['traced_mib']:.1f} | {r['error'][:60]} | | |")  # fmt: skip
            continue
        print(f"| {r['workload']} | {r['batch']} | {r['plan']} | {r['cap_mib']} | "
              f"{r['traced_mib']:.1f} | {r['measured_mib']:.1f} | {r['excess_mib']:.1f} | "
              f"{r['step_ms']:.2f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
