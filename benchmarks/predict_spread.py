"""Run-to-run spread of `advisor predict`: does the ranking of machines survive CPU probe noise?

Runs ``advisor predict --json`` N times in separate processes (each probes and traces anew on
this machine), then prints how many distinct machine orderings (by runtime, cost, steady
iteration) came out, the smallest pairwise Kendall tau, and per machine the spread
``max / min - 1`` of its predicted steady iteration, runtime, and of the model's device
(the GPU kernel model on the operator trace), dispatch and input terms. ``--from-json`` analyses saved outputs instead of running.

    python benchmarks/predict_spread.py [--runs 5] [--model fcn] [--batch-size 512]
        [--instances p3.2xlarge,...] [--from-json run1.json run2.json ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from itertools import combinations
from pathlib import Path
from typing import Any

INSTANCES = (
    "p2.xlarge,p3.2xlarge,g4dn.xlarge,g5.xlarge,g6.xlarge,g6e.xlarge,p4d.24xlarge,c5.4xlarge"
)


def kendall_tau(a: list[str], b: list[str]) -> float:
    """Kendall's tau between two orderings of the same items."""
    pos = {m: i for i, m in enumerate(b)}
    pairs = list(combinations(a, 2))
    discordant = sum(pos[x] > pos[y] for x, y in pairs)
    return 1 - 2 * discordant / len(pairs)


def _order(run: dict[str, Any], key: Any) -> list[str]:
    return [m["machine"] for m in sorted(run["machines"], key=key)]


def spread(values: list[float]) -> float:
    """max / min - 1 (0 when all equal or not positive)."""
    return max(values) / min(values) - 1 if min(values) > 0 else 0.0


def report(runs: list[dict[str, Any]]) -> str:
    keys = {
        "runtime": lambda m: m["estimate"]["runtime_s"]["value"],
        "cost": lambda m: m["estimate"]["cost_usd"]["value"],
        "t2": lambda m: m["prediction"]["phases"]["t2"]["value"],
    }
    lines = [
        "| ranking by | distinct orderings | min Kendall tau | first in each run |",
        "|---|---|---|---|",
    ]
    for name, key in keys.items():
        orders = [_order(r, key) for r in runs]
        taus = [kendall_tau(a, b) for a, b in combinations(orders, 2)] or [1.0]
        firsts = ", ".join(o[0].split(":")[-1] for o in orders)
        lines.append(
            f"| {name} | {len({tuple(o) for o in orders})} of {len(runs)} | {min(taus):.2f} | {firsts} |"
        )
    lines += [
        "",
        "| machine | limit | t2 ms (median) | t2 spread | runtime spread | device | dispatch | input |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for machine in sorted(m["machine"] for m in runs[0]["machines"]):
        rows = [next(m for m in r["machines"] if m["machine"] == machine) for r in runs]
        t2 = sorted(keys["t2"](m) for m in rows)
        terms = {
            k: spread([m["prediction"]["breakdown"].get(k, 0.0) for m in rows])
            for k in ("device", "dispatch", "input")
        }
        limits = ",".join(sorted({m["prediction"]["bottleneck"] for m in rows}))
        lines.append(
            f"| {machine} | {limits} | {t2[len(t2) // 2] * 1e3:.2f} | {spread(t2):.0%} | "
            f"{spread([keys['runtime'](m) for m in rows]):.0%} | {terms['device']:.0%} | "
            f"{terms['dispatch']:.0%} | {terms['input']:.0%} |"
        )
    probes = [r["probe"] for r in runs]
    lines += [
        "",
        "Local probe per run: init "
        + ", ".join(f"{p['init_s']:.0f}" for p in probes)
        + " s; traced loader time per batch "
        + ", ".join(f"{1e3 * p['fingerprint'].get('data_s', 0.0):.1f}" for p in probes)
        + " ms.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model", default="fcn")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--instances", default=INSTANCES)
    parser.add_argument("--from-json", nargs="+", default=None)
    args = parser.parse_args(argv)
    if args.from_json:
        runs = [json.loads(Path(f).read_text()) for f in args.from_json]
    else:
        cmd = [
            "advisor",
            "predict",
            "-m",
            args.model,
            "-b",
            str(args.batch_size),
            "-i",
            args.instances,
            "--json",
        ]
        runs = [
            json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            for _ in range(args.runs)
        ]
    print(report(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
