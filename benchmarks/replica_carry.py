"""FSDP's plan peak on many ranks carried from its traces on two, against its own trace (#49).

For each FSDP layout (ZeRO-2 and ZeRO-3, with and without checkpointing and accumulation), the
step traced on 2 and 4 ranks is carried (``probes.operators.replica_carry.carried``) to
``--ranks`` (one machine's 8 GPUs, two machines', eight machines'): the farthest reach, since a
search carries from 2 and the largest count it traced. This traces the same step on those ranks
and prints, per layout and rank count, the largest difference of any moment's bytes, the
carried peak's error at micro-batches 1, 2, 8 and 32 (negative: under the trace, the dangerous
side) and the seconds each took (the carry's: its two traces).

    python benchmarks/replica_carry.py [--workload examples.transformers:gpt2_large]
        [--layers 4] [--ranks 8,16,64] [--json FILE]
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
PLANS = (
    "precision=bf16,sharding=gradients",
    "precision=bf16,sharding=parameters",
    "precision=bf16,accumulation=2,checkpointing=blocks,sharding=parameters",
)


def lines(trace: Any, workload: str, plan: Any, hps: dict[str, Any], ranks: int) -> Any:
    """The peak lines of the step ``trace`` gives at the two traced micro-batches, and the two
    traced steps."""
    from advisor.probes.operators.peak_lines import TRACED_BATCHES, PeakLines, envelope

    low, high = TRACED_BATCHES
    a, b = (trace(workload, m, plan, hps, replicas=ranks, sharding=plan.sharding)
            for m in (low, high))  # fmt: skip
    span = envelope(a.timeline, b.timeline, high - low, 1 - low)
    return PeakLines(low, high, span, a.state), (a, b)


def case(workload: str, layers: int, text: str, ranks: int) -> dict[str, Any]:
    """One layout on ``ranks`` ranks: carried against traced."""
    from advisor.probes.operators.plan_peak import trace_plan_peak
    from advisor.probes.operators.replica_carry import carried as carry

    from advisor.prediction.step.plan import parse_plan

    def from_two(workload: str, m: int, plan: Any, hps: Any, replicas: int, sharding: str) -> Any:
        low, high = (trace_plan_peak(workload, m, plan, hps, replicas=r, sharding=sharding)
                     for r in (2, 4))  # fmt: skip
        return carry(replicas, low, high, 2, 4)

    plan = parse_plan(text)
    hps = {"layers": layers}
    start = time.perf_counter()
    carried, (ca, cb) = lines(from_two, workload, plan, hps, ranks)
    carried_s = time.perf_counter() - start
    start = time.perf_counter()
    whole, (wa, wb) = lines(trace_plan_peak, workload, plan, hps, ranks)
    whole_s = time.perf_counter() - start
    same = len(ca.timeline) == len(wa.timeline) and len(cb.timeline) == len(wb.timeline)
    moment = (
        max(
            abs(u - v)
            for c, w in ((ca, wa), (cb, wb))
            for p, q in zip(c.timeline, w.timeline, strict=True)
            for u, v in zip(p, q, strict=True)
        )
        if same
        else None
    )
    errors = {m: sum(carried.at(m).values()) / sum(whole.at(m).values()) - 1 for m in MICROS}
    return {"plan": text, "ranks": ranks, "moment_bytes": moment, "errors": errors,
            "carried_s": carried_s, "whole_s": whole_s,
            "whole_gib": {m: sum(whole.at(m).values()) / 2**30 for m in MICROS}}  # fmt: skip


def table(rows: list[dict[str, Any]]) -> str:
    head = " | ".join(f"micro {m}" for m in MICROS)
    out = [f"| plan | ranks | largest moment difference, bytes | {head} | carried s | traced s |",
           "|---|---:|---:|" + "---:|" * (len(MICROS) + 2)]  # fmt: skip
    for r in rows:
        errs = " | ".join(f"{e:+.4%}" for e in r["errors"].values())
        moment = "other ops" if r["moment_bytes"] is None else f"{r['moment_bytes']:,}"
        out.append(f"| {r['plan']} | {r['ranks']} | {moment} | {errs} | {r['carried_s']:.1f} | "
                   f"{r['whole_s']:.1f} |")  # fmt: skip
    worst = min(e for r in rows for e in r["errors"].values())
    out.append(f"\nMost under the trace: {worst:+.4%}.")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="examples.transformers:gpt2_large")
    parser.add_argument("--layers", type=int, default=4, help="blocks traced (both ways)")
    parser.add_argument("--ranks", default="8,16,64", help="rank counts, comma-separated")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))  # examples/, as the isolated worker finds it
    rows = []
    for text in PLANS:
        for ranks in (int(r) for r in args.ranks.split(",")):
            rows.append(case(args.workload, args.layers, text, ranks))
            print(f"{text} x{ranks}: done", file=sys.stderr, flush=True)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
    print(f"{args.workload} at {args.layers} blocks, carried from 2 and 4 ranks\n")
    print(table(rows))


if __name__ == "__main__":
    main()
