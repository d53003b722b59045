"""How long the operator trace of a training step takes, and what it holds (issue #26).

Each workload is traced in a fresh Python process (as ``advisor predict`` would on a cold
start), ``--repeats`` times; the table gives the median wall time of the whole process and of
the trace call alone (with the imports of torch and the tracer), its CPU time (less
sensitive to other processes on a shared machine), the child's peak resident memory, the operators, launches per phase,
the products' FLOPs and their ratio to ``6 N tokens`` for the language models. Run from the
repository root::

    python benchmarks/operator_trace.py --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = [  # (workload, batch size, tokens per sample for 6 N T; 0: not a language model)
    ("examples.transformers:gpt2_large", 1, 1024),
    ("examples.transformers:opt_13", 1, 2048),
    ("examples.transformers:gpt3_27", 1, 2048),
    ("examples.transformers:bert_large", 8, 512),
    ("resnet50", 64, 0),
    ("lstm", 20, 0),
]
CHILD = """
import json, resource, sys, time
start, cpu = time.perf_counter(), time.process_time()
from advisor.probes.operators import trace_workload
trace = trace_workload(sys.argv[1], int(sys.argv[2]))
took, cpu = time.perf_counter() - start, time.process_time() - cpu
products = sum(o.flops * o.count for o in trace.operators if o.kind in ("linear", "bmm", "conv"))
print(json.dumps({"trace_s": took, "cpu_s": cpu, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    / 1024, "operators": len(trace.operators), "phases": trace.launches_by_phase(),
    "launches": trace.launches, "products": products, "parameters": trace.parameters,
    "executed": trace.executed}))
"""


@dataclass(frozen=True)
class Traced:
    """One traced process: its wall time, the trace call's, its peak memory, the trace."""

    process_s: float
    trace_s: float
    cpu_s: float
    rss_mb: float
    operators: int
    phases: dict[str, int]
    launches: int
    products: float
    parameters: int


def run_case(workload: str, batch: int) -> Traced:
    """Trace ``workload`` at ``batch`` in a fresh process."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, workload, str(batch)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    d = json.loads(out.stdout.strip().splitlines()[-1])
    return Traced(
        time.perf_counter() - start,
        float(d["trace_s"]),
        float(d["cpu_s"]),
        float(d["rss_mb"]),
        int(d["operators"]),
        {str(k): int(v) for k, v in d["phases"].items()},
        int(d["launches"]),
        float(d["products"]),
        int(d["parameters"]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="Time the operator trace of a step.")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        "| workload | batch | process s | trace s | trace CPU s | peak RSS MB | operators | launches "
        "(fwd / bwd / opt) | product TFLOP | / 6 N T |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for workload, batch, tokens in CASES:
        runs = [run_case(workload, batch) for _ in range(args.repeats)]
        last = runs[-1]
        ph = last.phases
        ratio = last.products / (6 * last.parameters * tokens * batch) if tokens else None
        print(
            f"| {workload.split(':')[-1]} | {batch} "
            f"| {statistics.median(r.process_s for r in runs):.1f} "
            f"| {statistics.median(r.trace_s for r in runs):.1f} "
            f"| {statistics.median(r.cpu_s for r in runs):.1f} "
            f"| {max(r.rss_mb for r in runs):.0f} | {last.operators} "
            f"| {last.launches} ({ph['forward']} / {ph['backward']} / {ph['optimizer']}) "
            f"| {last.products / 1e12:.2f} | {'-' if ratio is None else f'{ratio:.3f}'} |"
        )


if __name__ == "__main__":
    main()
