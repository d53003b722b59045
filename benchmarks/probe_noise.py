"""The noise floor of probing on this machine: the same probe and the same short training run,
each repeated in separate processes.

The iteration-time model extrapolates one probe process to one training process. If two
identical processes on this machine run at different speeds, no estimator can predict a run
better than that spread. This measures it: ``--probes`` probes (``run_probe``, a child process
each) and ``--runs`` one-epoch training runs (a child process each) of the same case,
interleaved, and prints the steady iteration time (median of iterations 2..) of each.

    python benchmarks/probe_noise.py                       # fcn b64 2 threads, 6 probes, 4 runs
    python benchmarks/probe_noise.py --case simple-cnn:32:1 --write-docs
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
SECTION = "## Probe noise floor (the same probe and run repeated in separate processes)"

RUN_CODE = """
import json, sys
from advisor.probes import torch_runner as tr
spec = json.loads(sys.argv[1])
tr.configure(spec["threads"])
setup, _, _ = tr.build_setup(spec["workload"], spec["batch"], spec["n_train"], 212)
out = tr.train(setup, 1)
print(json.dumps({"t2": out["steady_iteration_s"], "iterations": out["iterations"]}))
"""


def probe_t2(workload: str, batch: int, threads: int, iterations: int) -> float:
    from advisor.probes.result import ProbeRequest
    from advisor.probes.runner import run_probe

    result = run_probe(ProbeRequest(workload, batch, iterations=iterations, threads=threads))
    if not result.ok:
        raise SystemExit(f"probe failed: {result.status} {result.error}")
    return statistics.median(result.iteration_s[1:])


def run_t2(workload: str, batch: int, threads: int, n_train: int) -> float:
    spec = {"workload": workload, "batch": batch, "threads": threads, "n_train": n_train}
    proc = subprocess.run(
        [sys.executable, "-c", RUN_CODE, json.dumps(spec)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"run failed: {proc.stderr.strip().splitlines()[-1:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["t2"])


def spread(values: list[float]) -> str:
    med = statistics.median(values)
    return (
        f"median {1000 * med:.1f} ms, min {1000 * min(values):.1f}, max {1000 * max(values):.1f} "
        f"(max/min - 1 = {100 * (max(values) / min(values) - 1):.1f} %)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--case", default="fcn:64:2", help="workload:batch:threads")
    parser.add_argument("--probes", type=int, default=6)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=20, help="probe iterations k")
    parser.add_argument("--n-train", type=int, default=64 * 60, help="samples per run epoch")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    workload, batch, threads = args.case.split(":")
    b, t = int(batch), int(threads)
    started = time.time()
    probes: list[float] = []
    runs: list[float] = []
    for i in range(max(args.probes, args.runs)):  # interleaved: drift hits both alike
        if i < args.probes:
            probes.append(probe_t2(workload, b, t, args.iterations))
            print(f"probe {i + 1}: t2 {1000 * probes[-1]:.1f} ms", file=sys.stderr)
        if i < args.runs:
            runs.append(run_t2(workload, b, t, args.n_train))
            print(f"run {i + 1}: t2 {1000 * runs[-1]:.1f} ms", file=sys.stderr)
    ratio = statistics.median(runs) / statistics.median(probes) - 1
    text = "\n".join(
        [
            f"Command: `python benchmarks/probe_noise.py {' '.join(sys.argv[1:])}`",
            "",
            f"Case {args.case}: {args.probes} probes (k={args.iterations}) and {args.runs} "
            f"one-epoch runs ({args.n_train} samples), each in its own process, interleaved.",
            "",
            f"- probes, steady iteration: {spread(probes)}",
            f"- runs, steady iteration: {spread(runs)}",
            f"- median run / median probe - 1 = {100 * ratio:+.1f} %",
            f"- every value (ms): probes {[round(1000 * v, 1) for v in probes]}, "
            f"runs {[round(1000 * v, 1) for v in runs]}",
            "",
            f"Benchmark wall time {time.time() - started:.0f} s.",
        ]
    )
    print(text)
    if args.write_docs:
        doc = DOCS.read_text(encoding="utf-8")
        if SECTION not in doc:
            doc = doc.rstrip("\n") + f"\n\n{SECTION}\n"
        start = doc.index(SECTION) + len(SECTION)
        nxt = doc.find("\n## ", start)
        end = len(doc) if nxt < 0 else nxt
        DOCS.write_text(doc[:start] + "\n\n" + text + "\n" + doc[end:], encoding="utf-8")


if __name__ == "__main__":
    main()
