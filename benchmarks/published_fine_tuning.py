"""LoRA fine-tuning steps predicted against published measurements (issue #48).

Each row of ``benchmarks/data/fine-tuning/nemo-automodel-lora.csv`` (NVIDIA NeMo AutoModel's
published single-GPU LoRA throughputs, cited there) is predicted with ``advisor predict`` on
the catalog machine of its GPU, under its own plan: bf16, its global batch as its micro-batches
(``--plan accumulation=N``), its sequence length, LoRA rank 16 on every linear layer of the
blocks with the row's dropout. Reported: the predicted steady step (device and host terms, the limit) against the
published "time per global step", tokens per second per GPU, the ratio between the rows
(model to model) beside the published one, and the predicted memory per GPU against the GPU
the row ran on. Nothing is fitted to these rows.

    python benchmarks/published_fine_tuning.py [--advisor PATH] [--other PATH] [--json FILE]

``--other``: a second build's ``advisor`` (another checkout), each row predicted by both.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "fine-tuning" / "nemo-automodel-lora.csv"


def rows() -> list[dict[str, str]]:
    with DATA.open(newline="") as f:
        return list(csv.DictReader(f))


def predict(advisor: str, row: dict[str, str]) -> dict[str, Any]:
    """``advisor predict --json`` of ``row``'s configuration, in a fresh advisor home."""
    command = [
        advisor, "predict", "-m", f"hf:{row['hf_name']},dropout={row['lora_dropout']}",
        "--method", row["method"],
        "--seq-len", row["seq_len"], "-b", row["global_batch"], "--precision", "bf16",
        "--plan", f"accumulation={row['accumulation']}", "-i", row["instance"], "--json",
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as home:
        done = subprocess.run(command, capture_output=True, text=True, check=True,
                              env={**os.environ, "ADVISOR_HOME": home})  # fmt: skip
    machine = json.loads(done.stdout)["machines"][0]
    p = machine["prediction"]
    t2 = p["phases"]["t2"]
    tokens = int(row["global_batch"]) * int(row["seq_len"])
    return {
        "step_s": t2["value"], "low": t2["low"], "high": t2["high"],
        "device_s": p["breakdown"]["device"], "host_s": p["breakdown"]["dispatch"],
        "limit": p["bottleneck"], "tokens_per_s": tokens / t2["value"],
        "memory_gib": machine["memory"]["need_gib"], "have_gib": machine["memory"]["have_gib"],
        "top": [(o["operator"], round(o["share"], 3)) for o in p["top_operators"][:4]],
    }  # fmt: skip


def table(results: list[dict[str, Any]], builds: list[str]) -> str:
    head = ("| model | GPU | plan | published step s | tokens/s/GPU | build | predicted step s "
            "[interval] | device / host s | tokens/s/GPU | predicted / published | memory GiB "
            "(GPU has) |")  # fmt: skip
    lines = [head, "|" + "---|" * 11]
    for r in results:
        plan = f"bf16, {r['micro_batch']} x {r['accumulation']}, seq {r['seq_len']}"
        for build in builds:
            p = r[build]
            lines.append(
                f"| {r['model']} | {r['gpu']} | {plan} | {float(r['step_s']):.2f} | "
                f"{float(r['tokens_per_s_per_gpu']):,.0f} | {build} | {p['step_s']:.2f} "
                f"[{p['low']:.1f}-{p['high']:.1f}] | {p['device_s']:.1f} / {p['host_s']:.1f} | "
                f"{p['tokens_per_s']:,.0f} | x{p['step_s'] / float(r['step_s']):.2f} | "
                f"{p['memory_gib']:.1f} ({p['have_gib']:.1f}) |"
            )
    if len(results) >= 2:
        a, b = results[0], results[1]
        published = float(a["step_s"]) / float(b["step_s"])
        for build in builds:
            ratio = a[build]["step_s"] / b[build]["step_s"]
            lines.append(f"\n{a['model']} / {b['model']} step time, {build}: predicted "
                         f"{ratio:.3f}, published {published:.3f}")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--advisor", default="advisor", help="this build's advisor command")
    ap.add_argument("--other", help="another build's advisor command, predicted beside")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    builds = {"this": args.advisor, **({"other": args.other} if args.other else {})}
    results = []
    for row in rows():
        result: dict[str, Any] = dict(row)
        for name, command in builds.items():
            result[name] = predict(command, row)
            print(f"{row['model']} ({name}): {json.dumps(result[name])}", flush=True)
        results.append(result)
    print(table(results, list(builds)))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
