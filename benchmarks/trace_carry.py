"""A deep builder's operator trace carried from two shallow traces against its whole trace
(issue #46).

``probes.operators.layer_scaling`` carries the step's kernels (for its time) of a builder that
declares its depth (``blocks``, ``layers=``) from meta traces at ``DECLARED_SHALLOW`` blocks, as
it does an ``hf:`` model's. This traces the same step whole and prints, per workload and batch
size: the kernels whose call count differs, the step's FLOPs and bytes, the kernel model's
step time on a few GPUs (carried / whole), and the seconds each trace took, in one process.

    python benchmarks/trace_carry.py [--workloads examples.transformers:gpt2_large ...]
        [--batches 1 8 32] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("examples.transformers:gpt2_large", "examples.transformers:gpt3_13")
GPUS = ("T4", "A100-80GB", "H100")


def case(workload: str, batch: int) -> dict[str, Any]:
    """One workload at one batch size: the carried trace against the whole one."""
    from advisor.probes.operators.layer_scaling import declared_depth, scaled_declared_trace
    from advisor.probes.operators.torch_workload import trace_on_meta

    from advisor.prediction.kernels import predict_trace

    depth = declared_depth(workload, {})
    if depth is None:
        raise SystemExit(f"{workload} declares no depth (a `blocks` attribute)")
    start = time.perf_counter()
    carried = scaled_declared_trace(workload, {}, lambda hps: trace_on_meta(workload, batch, hps))
    carried_s = time.perf_counter() - start
    start = time.perf_counter()
    whole = trace_on_meta(workload, batch, {"layers": depth})
    whole_s = time.perf_counter() - start
    if carried is None:
        return {"workload": workload, "batch": batch, "carried": False, "whole_s": whole_s}
    counts = [{o.key: o.count for o in t.operators if o.phase != "optimizer"}
              for t in (carried, whole)]  # fmt: skip
    differ = sum(counts[0].get(k) != counts[1].get(k) for k in {*counts[0], *counts[1]})

    def total(trace: Any, what: str) -> float:
        return sum(getattr(o, what) * o.count for o in trace.operators)

    steps = [predict_trace(t, list(GPUS)) for t in (carried, whole)]
    return {
        "workload": workload, "batch": batch, "depth": depth, "carried": True,
        "kernels": len(counts[1]), "counts_differ": differ,
        "parameters": carried.parameters / whole.parameters,
        "flops": total(carried, "flops") / total(whole, "flops"),
        "bytes": total(carried, "bytes") / total(whole, "bytes"),
        "step": {g: steps[0][g].total.value / steps[1][g].total.value for g in GPUS},
        "carried_s": carried_s, "whole_s": whole_s,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # examples/ as the isolated worker finds it
    rows = []
    print("| workload | batch | kernels | counts differ | parameters | FLOPs | bytes | "
          + " | ".join(f"step {g}" for g in GPUS) + " | carried s | whole s |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(GPUS) + "---:|---:|")
    for workload in args.workloads:
        for batch in args.batches:
            row = case(workload, batch)
            rows.append(row)
            if not row["carried"]:
                print(f"| {workload} | {batch} | not carried | | | | | | | | | "
                      f"{row['whole_s']:.1f} |")  # fmt: skip
                continue
            steps = " | ".join(f"{row['step'][g]:.6f}" for g in GPUS)
            print(f"| {workload.split(':')[-1]} ({row['depth']} blocks) | {batch} | "
                  f"{row['kernels']} | {row['counts_differ']} | {row['parameters']:.6f} | "
                  f"{row['flops']:.6f} | {row['bytes']:.6f} | {steps} | "
                  f"{row['carried_s']:.1f} | {row['whole_s']:.1f} |", flush=True)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
