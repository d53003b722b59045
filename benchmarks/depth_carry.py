"""A deep builder's plan peak carried from two shallow traces against its whole trace (issue #46).

For each plan layout the plan search traces (precision, accumulation, checkpointing, and how the
GPUs share the state), ``probes.operators.layer_scaling`` carries the peak lines of a builder
that declares its depth (``blocks``, ``layers=``) from traces at ``DECLARED_SHALLOW`` blocks
(else ``DECLARED_DEEPER``), kind of moment by kind; this traces the same step whole at the
builder's depth and prints the depths carried from, the carried peak's error at micro-batches 1, 2, 8 and 32 (negative: under the whole trace, the
dangerous side) and the seconds each took, in one process. ZeRO-1's step is the product's:
DDP's carried step with the optimizer over the deep model's largest partition (``ddp_lines``).

    python benchmarks/depth_carry.py [--workload examples.transformers:gpt2_large]
        [--only TEXT] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MICROS = (1, 2, 8, 32)
LAYOUTS = (  # (plan text, GPUs)
    ("", 1),
    ("precision=bf16", 1),
    ("precision=bf16", 8),
    ("precision=bf16,sharding=optimizer", 8),
    ("sharding=optimizer", 8),
    ("precision=bf16,sharding=optimizer", 32),
    ("precision=bf16,sharding=gradients", 8),
    ("precision=bf16,sharding=parameters", 8),
    ("precision=bf16,sharding=parameters", 2),
    ("precision=bf16,accumulation=2", 1),
    ("precision=bf16,checkpointing=blocks", 1),
    ("checkpointing=blocks", 1),
    ("precision=bf16,accumulation=2,checkpointing=blocks", 8),
    ("precision=bf16,accumulation=2,checkpointing=blocks,sharding=parameters", 4),
)


def case(workload: str, depth: int, text: str, gpus: int) -> dict[str, Any]:
    """One layout: the carried and the whole peak's totals, their errors and times."""
    from advisor.probes.operators.ddp_lines import zero1_lines
    from advisor.probes.operators.layer_scaling import scaled_declared_lines
    from advisor.probes.operators.plan_peak import lines_here

    from advisor.prediction.step.plan import parse_plan

    plan = parse_plan(text)
    kw = {"replicas": gpus, "sharding": plan.sharding if gpus > 1 else "none"}
    zero1 = kw["sharding"] == "optimizer"  # as the product reads it: from DDP's step
    start = time.perf_counter()
    shallow = {**kw, "sharding": "none"} if zero1 else kw
    carried = scaled_declared_lines(  # 4 and 6 blocks, else 6 and 8 (``DECLARED_DEEPER``)
        workload, {}, lambda hps: lines_here(workload, plan, hps, **shallow)
    )
    if zero1 and carried is not None:
        carried = zero1_lines(carried, gpus)
    carried_s = time.perf_counter() - start
    start = time.perf_counter()
    whole = lines_here(workload, plan, {"layers": depth}, **kw)
    whole_s = time.perf_counter() - start
    errors = {
        m: (sum(carried.at(m).values()) / sum(whole.at(m).values()) - 1) if carried else None
        for m in MICROS
    }
    depths = next((n.split(" carried from ")[1] for n in (carried.notes if carried else ())
                   if " carried from " in n), "")  # fmt: skip
    return {"plan": text or "fp32", "gpus": gpus, "carried": carried is not None, "from": depths,
            "errors": errors, "carried_s": carried_s, "whole_s": whole_s,
            "whole_gib": {m: sum(whole.at(m).values()) / 2**30 for m in MICROS}}  # fmt: skip


def table(rows: list[dict[str, Any]]) -> str:
    head = " | ".join(f"micro {m}" for m in MICROS)
    lines = [f"| plan | GPUs | carried from | {head} | carried s | whole s |",
             "|---|---:|---|" + "---:|" * (len(MICROS) + 2)]  # fmt: skip
    for r in rows:
        errs = " | ".join(
            "traced whole" if e is None else f"{e:+.2%}" for e in r["errors"].values()
        )
        lines.append(f"| {r['plan']} | {r['gpus']} | {r['from']} | {errs} | {r['carried_s']:.1f} | "
                     f"{r['whole_s']:.1f} |")  # fmt: skip
    worst = min((e for r in rows for e in r["errors"].values() if e is not None), default=0.0)
    lines.append(f"\nMost under the whole trace: {worst:+.2%}.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="examples.transformers:gpt2_large")
    parser.add_argument("--only", default="", help="the layouts whose plan text has this")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))  # examples/, as the isolated worker finds it
    from advisor.probes.operators.layer_scaling import declared_depth

    depth = declared_depth(args.workload, {})
    if depth is None:
        raise SystemExit(f"{args.workload} declares no depth deeper than 6 blocks (``blocks``)")
    rows = []
    for text, gpus in (lo for lo in LAYOUTS if args.only in lo[0]):
        rows.append(case(args.workload, depth, text, gpus))
        print(f"{rows[-1]['plan']} x{gpus}: done", file=sys.stderr, flush=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    print(f"{args.workload} at its {depth} blocks\n")
    print(table(rows))


if __name__ == "__main__":
    main()
