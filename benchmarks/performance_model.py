"""Self-check of the cross-device performance model's CPU path on this machine.

Probe a workload at 1 and at 2 threads, predict each thread count's steady iteration from the
probe at the other (Amdahl prior, no fitting to these probes), and print predicted vs
measured with the error. ``--write-docs`` replaces the "Cross-device performance model
self-check" section of docs/benchmarks.md with the result and this command.

    python benchmarks/performance_model.py [--model fcn] [--batch-size 256] [--write-docs]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.probes.runner import run_probe
from advisor.providers.catalog._types import InstanceType

from advisor.prediction.timing.model import predict
from advisor.prediction.timing.signature import steady_stats

SECTION = "## Cross-device performance model self-check"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


class _NoAccelerators:
    def accelerator(self, name: str) -> object:
        raise KeyError(name)


def _local(threads: int) -> InstanceType:
    # The local machine as the catalog describes it (provider "local", price 0).
    from advisor.providers.catalog import local_machine

    machine = local_machine()
    if machine.vcpus < threads:
        raise SystemExit(f"this machine has {machine.vcpus} CPUs, need {threads}")
    return machine


def _probe(model: str, batch: int, threads: int, iterations: int) -> ProbeResult:
    result = run_probe(
        ProbeRequest(workload=model, batch_size=batch, threads=threads, iterations=iterations)
    )
    if not result.ok:
        raise SystemExit(f"probe failed: {result.status}: {result.error}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="fcn")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)

    started = time.time()
    probes = {n: _probe(args.model, args.batch_size, n, args.iterations) for n in (1, 2)}
    lines = [
        f"{args.model}, batch {args.batch_size}, {args.iterations} iterations per probe, "
        f"{platform.processor() or platform.machine()}; shared, noisy machine.",
        "",
        "| from | to | measured t2 (ms) | predicted t2 (ms) [interval] | error | in interval |",
        "|---|---|---|---|---|---|",
    ]
    for src, dst in ((1, 2), (2, 1)):
        measured, _ = steady_stats(probes[dst].iteration_s)
        pred = predict(probes[src], _local(dst), _NoAccelerators(), threads=dst).phases.t2
        err = (pred.value - measured) / measured
        inside = pred.low <= measured <= pred.high
        lines.append(
            f"| {src} thread(s) | {dst} thread(s) | {measured * 1e3:.1f} | "
            f"{pred.value * 1e3:.1f} [{pred.low * 1e3:.1f}-{pred.high * 1e3:.1f}] | "
            f"{err:+.1%} | {'yes' if inside else 'no'} |"
        )
    lines += [
        "",
        f"Wall time {time.time() - started:.0f} s. Amdahl parallel fraction: prior 0.9 "
        "(not fitted to these probes). Command: "
        f"`python benchmarks/performance_model.py --model {args.model} "
        f"--batch-size {args.batch_size} --iterations {args.iterations} --write-docs`",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write_docs:
        doc = DOCS.read_text()
        head, sep, tail = doc.partition(SECTION + "\n")
        if not sep:
            raise SystemExit(f"section {SECTION!r} not found in {DOCS}")
        rest = tail.find("\n## ")
        after = tail[rest:] if rest >= 0 else ""
        DOCS.write_text(f"{head}{SECTION}\n\n{text}\n{after}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
