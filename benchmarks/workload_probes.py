"""Probe every built-in workload in every framework it declares at two batch sizes.

Each probe runs in its own process (``advisor.probes.runner.run_probe``, k iterations, the
real subprocess path) and the table gives the steady iteration time (median of iterations
2..k, with its bootstrap interval), FLOPs per iteration and per sample (2 per multiply-add;
torch: FlopCounterMode, Keras: TensorFlow's op statistics), the achieved GFLOP/s, the first
iteration and the probe's own wall time. ``--write-docs`` replaces the "Workload probes"
section of docs/benchmarks.md.

    python benchmarks/workload_probes.py                    # all workloads (~15 min, 2 cores)
    python benchmarks/workload_probes.py --only fcn,lstm --frameworks keras
    python benchmarks/workload_probes.py --write-docs
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
SECTION = "## Workload probes (steady iteration time and FLOPs per iteration)"
# two batch sizes per workload that a 2-core CPU probes in seconds
BATCHES: dict[str, tuple[int, int]] = {
    "fcn": (64, 256),
    "simple-cnn": (64, 256),
    "vgg-1": (64, 128),
    "vgg-2": (32, 64),
    "resnet50": (32, 64),
    "googlenet": (8, 16),
    "lstm": (20, 64),
}


def probe_row(name: str, framework: str, batch: int, k: int, threads: int) -> dict[str, Any]:
    from advisor.probes.result import ProbeRequest
    from advisor.probes.runner import run_probe

    from advisor.prediction.run.iteration_model import phase_times

    result = run_probe(
        ProbeRequest(
            workload=name,
            framework=framework,
            batch_size=batch,
            iterations=k,
            threads=threads,
            validation_batches=2,
            timeout_s=900,
        )
    )
    row: dict[str, Any] = {
        "workload": name,
        "framework": framework,
        "batch_size": batch,
        "status": result.status,
        "error": result.error,
        "probe_wall_s": result.wall_s,
    }
    if result.ok:
        t2 = phase_times(result).t2
        flops = result.flops_per_iteration
        row.update(
            t2=t2.to_dict(),
            t1=result.iteration_s[0],
            flops_per_iteration=flops,
            flops_per_sample=flops / batch if flops else None,
            gflops_per_s=flops / t2.value / 1e9 if flops and t2.value > 0 else None,
            parameters=result.parameters,
            peak_host_memory_mb=(result.peak_host_memory_bytes or 0) / 2**20,
        )
    return row


def format_row(r: dict[str, Any]) -> str:
    head = f"| {r['workload']} | {r['framework']} | {r['batch_size']} |"
    if r["status"] != "ok":
        return (
            head + f" {r['status']}: {(r['error'] or '')[:60]} | | | | | {r['probe_wall_s']:.1f} |"
        )
    t2 = r["t2"]
    fpi = r["flops_per_iteration"]
    return (
        head
        + f" {t2['value']:.4f} ({t2['low']:.4f}-{t2['high']:.4f}) | {r['t1']:.2f} |"
        + (
            f" {fpi / 1e9:.3f} | {r['flops_per_sample'] / 1e6:.2f} | {r['gflops_per_s']:.1f} |"
            if fpi
            else " - | - | - |"
        )
        + f" {r['probe_wall_s']:.1f} |"
    )


def report(rows: list[dict[str, Any]], command: str, threads: int, k: int) -> str:
    lines = [
        f"Command: `{command}` ({threads} threads, k = {k} iterations per probe, each probe in its "
        "own process; the machine is shared, so times are noisy).",
        "",
        "t2 = median of iterations 2..k (bootstrap interval); t1 = first iteration (graph tracing "
        "for Keras); FLOPs count 2 per multiply-add of the matrix products, forward + backward "
        "(torch: FlopCounterMode; Keras: TensorFlow op statistics, 3x forward, 2x for the first "
        "layer); GFLOP/s = FLOPs per iteration / t2.",
        "",
        "| workload | framework | batch | t2 s (interval) | t1 s | GFLOP / iteration | "
        "MFLOP / sample | GFLOP/s | probe wall s |",
        "|---|---|---|---|---|---|---|---|---|",
        *[format_row(r) for r in rows],
    ]
    pairs = _flop_agreement(rows)
    if pairs:
        lines += [
            "",
            "FLOPs per sample, Keras / torch: "
            + ", ".join(f"{name} {ratio:.3f}" for name, ratio in pairs.items())
            + ".",
        ]
    return "\n".join(lines)


def _flop_agreement(rows: list[dict[str, Any]]) -> dict[str, float]:
    per: dict[str, dict[str, float]] = {}
    for r in rows:
        if r["status"] == "ok" and r.get("flops_per_sample"):
            per.setdefault(r["workload"], {})[r["framework"]] = r["flops_per_sample"]
    return {n: v["keras"] / v["torch"] for n, v in per.items() if {"keras", "torch"} <= set(v)}


def main() -> None:
    from advisor.search_spaces.workloads import get

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated workload names (default: all)")
    parser.add_argument("--frameworks", default="torch,keras")
    parser.add_argument("--iterations", type=int, default=10, help="k per probe")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(BATCHES)
    frameworks = args.frameworks.split(",")
    started = time.time()
    rows = []
    for name in names:
        workload = get(name)
        for framework in frameworks:
            if framework not in workload.frameworks:
                continue
            for batch in BATCHES.get(name, workload.default_batch_sizes[:2]):
                rows.append(probe_row(name, framework, batch, args.iterations, args.threads))
                print(format_row(rows[-1]), file=sys.stderr, flush=True)
    command = ("python benchmarks/workload_probes.py " + " ".join(sys.argv[1:])).strip()
    text = report(rows, command, args.threads, args.iterations)
    text += f"\n\nBenchmark wall time {time.time() - started:.0f} s."
    from docs_section import publish  # the benchmarks beside it

    publish(SECTION, text, args.write_docs, rows, args.json, DOCS)


if __name__ == "__main__":
    main()
