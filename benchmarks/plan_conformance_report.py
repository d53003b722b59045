"""The plan conformance benchmark's tables (``benchmarks/plan_conformance.py``): per plan and per
case, and measured rows kept from an earlier run scored by the model as it is now
(``--rescore``)."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def per_plan(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each plan's median |error|, worst under-prediction at the upper estimate, case count."""
    out = []
    for key in dict.fromkeys((r["plan"], r["processes"]) for r in rows):
        mine = [r for r in rows if (r["plan"], r["processes"]) == key]
        out.append({
            "plan": key[0], "processes": key[1], "cases": len(mine),
            "median_abs_error": statistics.median(abs(r["error"]) for r in mine),
            "worst_upper_error": min(r["upper_error"] for r in mine),
        })  # fmt: skip
    return out


def markdown(rows: list[dict[str, Any]], command: str, where: str = "this machine's CPU") -> str:
    plans = per_plan(rows)
    gpu = bool(rows) and rows[0]["device"] == "cuda"
    held = any("runs_when_held" in r for r in rows)
    met = all(p["median_abs_error"] <= 0.10 and p["worst_upper_error"] >= -0.05 for p in plans)
    predicted_words = (
        "`memory.plan.traced_memory` with CUDA's autocast lists plus the cuBLAS workspaces "
        "(`cublas_workspace`) for a step that multiplies matrices (upper: plus the trace's "
        "measured margin and, where the step convolves, cuDNN's workspace prior's high end)"
        if gpu
        else "`memory.plan.traced_memory` with the CPU's autocast lists (the traced tensors; "
        "upper: plus the trace's measured margin)"
    )
    measured_words = (
        "`torch.cuda.max_memory_allocated` of `advisor.train`'s real steady step under the "
        "plan, the allocator's cache emptied and its peak reset first"
        if gpu
        else "the allocator's peak of `advisor.train`'s real steady step under the plan (the "
        "worst of two gloo processes where sharded)"
    )
    lines = [
        f"`{command}` ({len(rows)} cases on {where}; {time.strftime('%Y-%m-%d')}). "
        f"Predicted: {predicted_words}. Measured: {measured_words}. **Goal "
        f"{'met' if met else 'NOT met'}**: median |error| <= 10 % per plan and no plan "
        "under-predicted by more than 5 % at its upper estimate.",
        "",
        "| plan | processes | cases | median abs error | worst at upper |",
        "|---|---:|---:|---:|---:|",
    ]
    for p in plans:
        lines.append(
            f"| {p['plan']} | {p['processes']} | {p['cases']} | {p['median_abs_error']:.1%} | "
            f"{p['worst_upper_error']:+.1%} |"
        )
    extra = " runs when held |" if held else ""
    lines += ["", "| workload | batch | plan | processes | predicted MiB | measured MiB | error |"
              + extra, "|---|---:|---|---:|---:|---:|---:|" + ("---|" if held else "")]  # fmt: skip
    for r in rows:
        cell = f" {'yes' if r.get('runs_when_held') else 'NO'} |" if held else ""
        lines.append(
            f"| {r['workload']} | {r['batch']} | {r['plan']} | {r['processes']} | "
            f"{r['predicted_mib']:.1f} | {r['measured_mib']:.1f} | {r['error']:+.1%} |" + cell
        )
    return "\n".join(lines)


def rescore(
    args: argparse.Namespace,
    hps: dict[str, dict[str, Any]],
    score: Callable[[dict[str, Any]], dict[str, Any]],
) -> int:
    """Measured rows kept from an earlier run (``--json``), scored by today's model
    (``score``; ``hps``: each workload's hyperparameters, for rows that do not name theirs)."""
    from docs_section import publish

    gpu, generation = [*args.gpu.split(","), ""][:2] if args.gpu else ("", "")
    rows = []
    for name in args.rescore.split(","):
        for row in json.loads(Path(name).read_text()):
            row.setdefault("hp", hps.get(row["workload"], {}))
            if row["device"] == "cuda":
                row.setdefault("gpu", gpu)
                row.setdefault("generation", generation or None)
            rows.append(score(row))
    device = rows[0]["device"] if rows else "cpu"
    where = "this machine's CPU"
    section = "## Plans' memory against the step that runs"
    if device == "cuda":
        where = f"one {rows[0].get('gpu') or 'GPU'} (the rows of {args.rescore}, rescored)"
        section += " on a GPU"
    command = f"python benchmarks/plan_conformance.py --rescore {args.rescore}"
    command += f" --gpu {args.gpu}" if args.gpu else ""
    publish(section, markdown(rows, command, where), args.write_docs, rows, args.json)
    return 0
