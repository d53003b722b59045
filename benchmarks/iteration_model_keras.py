"""The iteration-time model against a REAL full Keras training run (one case).

Probes the workload with the Keras probe in its own process (``run_probe``, framework
"keras", k iterations), sizes the dataset so the predicted run lasts ``--target-seconds``,
then trains it for real in another process (``advisor.probes.keras_runner.train``,
``model.fit`` with validation every epoch) and compares the prediction of
``advisor.prediction.run.iteration_model.estimate`` (iteration-based formula with validation) with
the real runtime, process start to the end of the last epoch (initialisation included).

    python benchmarks/iteration_model_keras.py                 # fcn b128 t2, ~2 min run
    python benchmarks/iteration_model_keras.py --quick         # smoke test, ~30 s
    python benchmarks/iteration_model_keras.py --case simple-cnn:64:2 --write-docs
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
SECTION = "## Iteration-time model vs real full training runs"
MARK = "### Keras case"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from iteration_model import (  # noqa: E402  (the torch benchmark's)
    Case,
    phase_values,
    probe_for_run,
    spawn_full_run,
    val_size,
)


def size_for(probe: Any, workload: Any, epochs: int, batch: int, target_s: float) -> int:
    """Smallest multiple of ``batch`` whose predicted run lasts at least ``target_s``."""
    from advisor.prediction.run.iteration_model import estimate

    n = batch
    while True:
        n_val = val_size(workload, n)
        if estimate(probe, n, n_val, epochs, batch).runtime.value >= target_s:
            return n
        n += batch * max(1, math.ceil(n / (batch * 10)))  # grow by about 10 % at a time


def run(args: argparse.Namespace) -> dict[str, Any]:
    from advisor.search_spaces.workloads import get

    from advisor.prediction.run.iteration_model import estimate, phase_times

    name, batch, threads = args.case.split(":")
    batch_size, n_threads = int(batch), int(threads)
    workload = get(name)
    probe = probe_for_run(Case(name, batch_size, n_threads), args.iterations, args.epochs, "keras")
    n_train = size_for(probe, workload, args.epochs, batch_size, args.target_seconds)
    n_val = val_size(workload, n_train)
    est = estimate(probe, n_train, n_val, args.epochs, batch_size)
    print(f"running: n_train {n_train}, predicted {est.runtime.value:.0f} s", file=sys.stderr)
    real = spawn_full_run(
        {
            "framework": "keras",
            "workload": name,
            "batch_size": batch_size,
            "threads": n_threads,
            "n_train": n_train,
            "n_val": n_val,
            "epochs": args.epochs,
        },
        timeout=max(600.0, 5 * est.runtime.high),
    )
    ph = phase_times(probe, n_train, n_val)
    return {
        "case": f"{name} keras b{batch_size} t{n_threads}",
        "n_train": n_train,
        "n_val": n_val,
        "epochs": args.epochs,
        "predicted": est.runtime.to_dict(),
        "real_s": real["real_s"],
        "error": (est.runtime.value - real["real_s"]) / real["real_s"],
        "inside": est.runtime.low <= real["real_s"] <= est.runtime.high,
        "probe_wall_s": probe.wall_s,
        "probe": phase_values(ph),
        "run": real,
        "breakdown": est.breakdown,
    }


def report(r: dict[str, Any], command: str) -> str:
    p, probe, run_ = r["predicted"], r["probe"], r["run"]
    return "\n".join(
        [
            MARK,
            "",
            f"Command: `{command}`",
            "",
            "Keras probe (k iterations timed by Keras' batch hooks, validation by its test hooks) "
            "and a real `model.fit` run of the same workload, each in its own process.",
            "",
            "| case | n_train / n_val | epochs | predicted s (interval) | real s | error % | inside | "
            "probe wall s | t1 probe / run s | t2 probe / run s | init probe / run s |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            f"| {r['case']} | {r['n_train']} / {r['n_val']} | {r['epochs']} | "
            f"{p['value']:.1f} ({p['low']:.1f}-{p['high']:.1f}) | {r['real_s']:.1f} | "
            f"{100 * r['error']:+.1f} | {'yes' if r['inside'] else 'no'} | {r['probe_wall_s']:.1f} | "
            f"{probe['t1']:.2f} / {run_['t1']:.2f} | {probe['t2']:.4f} / {run_['t2_median']:.4f} | "
            f"{probe['init']:.1f} / {run_['init_s']:.1f} |",
        ]
    )


def write_docs(text: str) -> None:
    """Put (or replace) the Keras case at the end of the iteration-model section."""
    doc = DOCS.read_text(encoding="utf-8")
    start = doc.index(SECTION) + len(SECTION)
    nxt = doc.find("\n## ", start)
    end = len(doc) if nxt < 0 else nxt
    body = doc[start:end]
    if MARK in body:
        body = body[: body.index(MARK)]
    body = body.rstrip() + "\n\n" + text + "\n"
    DOCS.write_text(doc[:start] + body + doc[end:], encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a ~10 s run: smoke test only")
    parser.add_argument("--case", default="fcn:128:2", help="workload:batch:threads")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20, help="probe iterations k")
    parser.add_argument("--target-seconds", type=float, default=120.0)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.epochs, args.iterations, args.target_seconds = 2, 6, 10.0
    started = time.time()
    row = run(args)
    command = ("python benchmarks/iteration_model_keras.py " + " ".join(sys.argv[1:])).strip()
    text = report(row, command) + f"\n\nBenchmark wall time {time.time() - started:.0f} s."
    print(text)
    if args.write_docs:
        write_docs(text)


if __name__ == "__main__":
    main()
