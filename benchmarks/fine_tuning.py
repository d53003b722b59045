"""Fine-tuning plans' predicted memory against the step ``advisor.train`` runs (issue #48).

Small configurations of open model families (``hf:<name>,layers=N,vocab=V``: the family's real
hidden and MLP widths, heads and key-value heads; fewer blocks and a smaller vocabulary so
that a real step fits this CPU) under full fine-tuning, LoRA (peft, rank 16 on every linear
layer) and frozen blocks (the first half and the embedding), each in the plain step and in
bf16, at two batch sizes. The measurement and the prediction are
``benchmarks/plan_conformance.py``'s: the allocator's peak of a steady real step on this CPU
(``memory_measure.cpu_peak``, the step ``advisor.train`` runs) against
``advisor.prediction.memory.plan.traced_memory`` with the CPU's autocast lists; the upper
estimate adds the trace margin. The fit decision is safe when no case's measured peak
exceeds its upper estimate by more than 5 %. QLoRA needs bitsandbytes on a CUDA device: not
measured here (its memory is modelled; docs/fine-tuning.md).

The depth check (``--depth``): a 12-block model's plan peak from its whole trace against the
one ``probes.operators.layer_scaling`` carries from traces of 2 and 4 blocks.

    python benchmarks/fine_tuning.py [--quick] [--depth] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

CONFIGS = (  # family at its real widths, cut to fit a CPU step
    "hf:Qwen/Qwen2.5-0.5B,layers=2,vocab=8192,seq_len=128",
    "hf:meta-llama/Llama-3.2-1B,layers=2,vocab=8192,seq_len=64",
)
# on a GPU (``--device cuda``): the families' real vocabularies and longer sequences
GPU_CONFIGS = (
    "hf:Qwen/Qwen2.5-0.5B,layers=4,seq_len=512",
    "hf:meta-llama/Llama-3.2-1B,layers=4,seq_len=512",
)
GPU_BATCHES = (2, 8)
METHODS = ("full", "lora", "frozen")
PLANS = ("", "precision=bf16")
BATCHES = (1, 2)


def run_case(
    config: str, method: str, plan: str, batch: int, device: str = "cpu"
) -> dict[str, Any]:
    from plan_conformance import measured, predicted, upper

    workload = f"{config},method={method}"
    start = time.perf_counter()
    pred = predicted(workload, {}, batch, plan, 1, device)
    high = upper(workload, {}, pred, device)
    meas = measured(workload, {}, batch, plan, 1, device)
    return {
        "config": config, "method": method, "plan": plan or "fp32", "batch": batch,
        "device": device,
        "measured_mib": meas / 2**20, "predicted_mib": pred / 2**20, "upper_mib": high / 2**20,
        "error": pred / meas - 1, "upper_error": high / meas - 1,
        "seconds": time.perf_counter() - start,
    }  # fmt: skip


DEPTH_CASES = (  # the whole trace against the one carried from 2 and 4 blocks
    "hf:Qwen/Qwen2.5-0.5B,layers=12,vocab=8192,seq_len=256,method=full",
    "hf:Qwen/Qwen2.5-0.5B,layers=12,vocab=8192,seq_len=256,method=lora",
)


def depth_case(workload: str, plan_text: str = "precision=bf16") -> list[dict[str, Any]]:
    """The plan's peak at micro-batches 1, 4 and 16 from the whole trace and from
    ``layer_scaling`` (CUDA's autocast lists, as the product predicts for a GPU)."""
    from advisor.probes.operators.layer_scaling import scaled_lines
    from advisor.probes.operators.peak_lines import TRACED_BATCHES, PeakLines, envelope
    from advisor.probes.operators.plan_peak import lines_here, trace_plan_peak

    from advisor.prediction.step.plan import parse_plan

    plan = parse_plan(plan_text)
    low, high = TRACED_BATCHES
    start = time.perf_counter()
    a, b = (trace_plan_peak(workload, m, plan) for m in (low, high))
    whole = PeakLines(low, high, envelope(a.timeline, b.timeline, high - low, 1 - low), a.state)
    whole_s = time.perf_counter() - start
    start = time.perf_counter()
    scaled = scaled_lines(workload, lambda w: lines_here(w, plan))
    scaled_s = time.perf_counter() - start
    assert scaled is not None
    rows = []
    for micro in (1, 4, 16):
        w, s = sum(whole.at(micro).values()), sum(scaled.at(micro).values())
        rows.append({"workload": workload, "plan": plan_text, "micro_batch": micro,
                     "whole_mib": w / 2**20, "scaled_mib": s / 2**20, "error": s / w - 1,
                     "whole_s": whole_s, "scaled_s": scaled_s})  # fmt: skip
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [abs(r["error"]) for r in rows]
    return {
        "cases": len(rows),
        "median_abs_error": statistics.median(errors),
        "worst_upper_error": min(r["upper_error"] for r in rows),
        "safe": all(r["upper_error"] >= -0.05 for r in rows),
    }


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    s = summary(rows)
    lines = [
        f"`{command}`: {s['cases']} cases; median |error| {s['median_abs_error']:.1%} (goal "
        f"<= 10 %), worst at the upper estimate {s['worst_upper_error']:+.1%} (fit decision "
        f"{'safe' if s['safe'] else 'NOT safe'}: no case over its upper estimate by > 5 %).",
        "",
        "| config | method | plan | batch | measured MiB | predicted MiB | error | upper error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['config'][3:]} | {r['method']} | {r['plan']} | {r['batch']} | "
            f"{r['measured_mib']:.1f} | {r['predicted_mib']:.1f} | {r['error']:+.1%} | "
            f"{r['upper_error']:+.1%} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one config, the plain step")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--depth", action="store_true", help="only the depth check")
    parser.add_argument("--plan", default=None, help="only this plan (e.g. precision=bf16)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the real steps run (cuda: larger configs, CUDA's autocast)")  # fmt: skip
    parser.add_argument("--config", default=None, help="only the configs containing this text")
    args = parser.parse_args(argv)
    if args.depth:
        found = [row for w in DEPTH_CASES for row in depth_case(w)]
        for row in found:
            print(json.dumps(row), flush=True)
        if args.json:
            args.json.write_text(json.dumps({"depth": found}, indent=1))
        return 0
    configs = GPU_CONFIGS if args.device == "cuda" else CONFIGS
    configs = configs[:1] if args.quick else configs
    configs = tuple(c for c in configs if args.config is None or args.config in c)
    batches = GPU_BATCHES if args.device == "cuda" else BATCHES
    plans = (args.plan,) if args.plan is not None else PLANS[:1] if args.quick else PLANS
    rows = []
    for config in configs:
        for method in METHODS:
            for plan in plans:
                for batch in batches:
                    row = run_case(config, method, plan, batch, args.device)
                    print(json.dumps(row), flush=True)
                    rows.append(row)
                    if args.json:  # kept as it goes: a long run's rows survive a stop
                        args.json.write_text(json.dumps({"rows": rows}, indent=1))
    command = (
        "python benchmarks/fine_tuning.py"
        + (" --quick" if args.quick else "")
        + (f" --plan {args.plan}" if args.plan else "")
        + (" --device cuda" if args.device == "cuda" else "")
    )
    print(markdown(rows, command))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary(rows)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
