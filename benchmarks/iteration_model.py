"""Acceptance test of the iteration-time model: probe, then a REAL full training run.

For each case (workload, batch size, threads) it runs a real probe in a separate process
(``run_probe``, k iterations), then a real full training run in another separate process
(``advisor.probes.torch_runner.train``) of ``--epochs`` epochs on a generated dataset, and
compares the runtime predicted from the probe (iteration-based formula, with validation) with
the real one. Real runtime = process start to the end of the last epoch, the same span the
prediction covers (initialisation included).

All cases of one workload share one dataset size (same data, different batch size and
"machine" = thread count), so their runtimes can be ranked: ``n_train`` is the smallest
multiple of every batch size of that workload such that every case's predicted run lasts at
least ``--target-seconds`` and its probe costs at most ``--max-probe-share`` of it.
``n_val`` keeps the workload's published validation/training ratio (at least 212 samples).

    python benchmarks/iteration_model.py                 # full benchmark (quiet machine!)
    python benchmarks/iteration_model.py --quick         # 2 tiny cases, a smoke test
    python benchmarks/iteration_model.py --cases fcn:128:2,simple-cnn:64:1 --write-docs
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_CASES = (
    "fcn:64:2,fcn:128:2,fcn:256:2,fcn:128:1,"
    "simple-cnn:32:2,simple-cnn:64:2,simple-cnn:128:2,simple-cnn:64:1"
)
QUICK_CASES = "fcn:64:2,simple-cnn:32:1"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
SECTION = "## Iteration-time model vs real full training runs"


@dataclass(frozen=True)
class Case:
    workload: str
    batch_size: int
    threads: int

    @property
    def label(self) -> str:
        return f"{self.workload} b{self.batch_size} t{self.threads}"


def parse_cases(text: str) -> list[Case]:
    cases = []
    for item in text.split(","):
        parts = item.strip().split(":")
        if len(parts) != 3:
            raise SystemExit(f"bad case {item!r}: write workload:batch:threads, e.g. fcn:128:2")
        cases.append(Case(parts[0], int(parts[1]), int(parts[2])))
    return cases


# ---- the full run, in its own process -------------------------------------------------------


def full_run(spec: dict[str, Any]) -> dict[str, Any]:
    """Build the workload at full size and train it (``spec["framework"]``: torch, the
    default, or keras); runs in a child process."""
    if spec.get("framework", "torch") == "keras":
        from advisor.probes.keras_runner import configure as configure_keras
        from advisor.probes.keras_runner import train
        from advisor.search_spaces.workloads import get

        configure_keras(spec["threads"], "cpu")
        setup = get(spec["workload"]).builder("keras")(
            batch_size=spec["batch_size"],
            n_train=spec["n_train"],
            n_val=spec["n_val"],
            seed=0,
            epochs=spec["epochs"],
        )
    else:
        from advisor.probes.torch_runner import (
            build_setup,
            configure,
            train,  # type: ignore[assignment]
        )

        configure(spec["threads"], "cpu")
        setup, _, _ = build_setup(
            spec["workload"],
            spec["batch_size"],
            spec["n_train"],
            spec["n_val"],
            seed=0,
            hyperparameters={"epochs": spec["epochs"]},
        )
    result = train(setup, spec["epochs"])
    end = time.time()
    return {
        "real_s": end - spec["process_start"],
        "init_s": result["first_batch_wall"] - spec["process_start"],
        "train_s": result["runtime_s"],
        "t1": result["first_iteration_s"],
        "t2_median": result["steady_iteration_s"],
        "validation_s": result["validation_s"],
        "epoch_s": result["epoch_s"],
        "val_accuracy": result["val_accuracy"],
        "iterations": result["iterations"],
    }


def spawn_full_run(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    spec = {**spec, "process_start": time.time()}
    proc = subprocess.run(
        [sys.executable, __file__, "--_full-run", json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"full run failed: {proc.stderr.strip().splitlines()[-3:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# ---- sizing ---------------------------------------------------------------------------------


def val_size(workload: Any, n_train: int) -> int:
    ratio = workload.n_val / workload.n_train
    return min(workload.n_val, max(212, round(n_train * ratio)))


def size_workload(
    probes: dict[Case, Any], workload: Any, epochs: int, target_s: float, share: float
) -> int:
    """Smallest shared n_train meeting the run-length and probe-share targets for all cases."""
    from advisor.prediction.run.iteration_model import estimate

    step = math.lcm(*(c.batch_size for c in probes))
    n = step
    while True:
        ok = True
        for case, probe in probes.items():
            est = estimate(probe, n, val_size(workload, n), epochs, case.batch_size)
            if est.runtime.value < max(target_s, probe.wall_s / share):
                ok = False
                break
        if ok:
            return n
        n += step * max(1, n // (step * 8))  # grow by about 12 % at a time


def probe_for_run(case: Case, iterations: int, epochs: int, framework: str = "torch") -> Any:
    """Probe ``case`` as a user would before the run (2 validation batches, the run's epochs
    as the recipe's); exit on a failed probe."""
    from advisor.probes.result import ProbeRequest
    from advisor.probes.runner import run_probe

    from advisor.prediction.run.iteration_model import phase_times

    probe = run_probe(
        ProbeRequest(
            case.workload,
            case.batch_size,
            framework=framework,
            iterations=iterations,
            threads=case.threads,
            validation_batches=2,
            hyperparameters={"epochs": epochs},
            timeout_s=900,
        )
    )
    if not probe.ok:
        raise SystemExit(f"probe {case.label} failed: {probe.status} {probe.error}")
    t2 = phase_times(probe).t2.value
    print(f"probed {case.label}: t2 {t2:.4f} s, wall {probe.wall_s:.1f} s", file=sys.stderr)
    return probe


def phase_values(ph: Any) -> dict[str, float]:
    """A probe's phase times (``PhaseTimes``) as plain central values."""
    return {name: getattr(ph, name).value for name in ("init", "t1", "t2", "v1", "v2")}


# ---- main -----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    from advisor.search_spaces.workloads import get

    from advisor.prediction.run.iteration_model import estimate, phase_times

    cases = parse_cases(args.cases or (QUICK_CASES if args.quick else DEFAULT_CASES))
    target = args.target_seconds if args.target_seconds else (20.0 if args.quick else 150.0)
    share = 1.0 if args.quick else args.max_probe_share

    def probe_case(case: Case) -> Any:
        return probe_for_run(case, args.iterations, args.epochs)

    probes = {case: probe_case(case) for case in cases}  # these size the datasets
    sizes = {}
    for name in sorted({c.workload for c in cases}):
        wl = get(name)
        mine = {c: p for c, p in probes.items() if c.workload == name}
        sizes[name] = size_workload(mine, wl, args.epochs, target, share)
    rows = []
    for case in cases:
        wl = get(case.workload)
        n_train = sizes[case.workload]
        n_val = val_size(wl, n_train)
        early = estimate(probes[case], n_train, n_val, args.epochs, case.batch_size)
        # By default the prediction comes from a probe taken just before the run, as a user
        # would probe and then train; the sizing probe's prediction is reported alongside.
        probe = probe_case(case) if args.probe_before_run else probes[case]
        est = estimate(probe, n_train, n_val, args.epochs, case.batch_size)
        print(
            f"running {case.label}: n_train {n_train}, predicted {est.runtime.value:.0f} s",
            file=sys.stderr,
        )
        real = spawn_full_run(
            {
                "workload": case.workload,
                "batch_size": case.batch_size,
                "threads": case.threads,
                "n_train": n_train,
                "n_val": n_val,
                "epochs": args.epochs,
            },
            timeout=max(600.0, 5 * est.runtime.high),
        )
        err = (est.runtime.value - real["real_s"]) / real["real_s"]
        early_err = (early.runtime.value - real["real_s"]) / real["real_s"]
        ph = phase_times(probe, n_train, n_val)
        rows.append(
            {
                "case": case.label,
                "workload": case.workload,
                "batch_size": case.batch_size,
                "threads": case.threads,
                "n_train": n_train,
                "n_val": n_val,
                "epochs": args.epochs,
                "predicted": est.runtime.to_dict(),
                "real_s": real["real_s"],
                "error": err,
                "sizing_probe_error": early_err,
                "inside": est.runtime.low <= real["real_s"] <= est.runtime.high,
                "probe_wall_s": probe.wall_s,
                "probe_share": probe.wall_s / real["real_s"],
                "probe": phase_values(ph),
                "run": real,
                "breakdown": est.breakdown,
            }
        )
        print(format_row(rows[-1]), file=sys.stderr)
    return rows


def format_row(r: dict[str, Any]) -> str:
    p = r["predicted"]
    return (
        f"| {r['case']} | {r['n_train']} / {r['n_val']} | {r['epochs']} | "
        f"{p['value']:.1f} ({p['low']:.1f}-{p['high']:.1f}) | {r['real_s']:.1f} | "
        f"{100 * r['error']:+.1f} | {'yes' if r['inside'] else 'no'} | "
        f"{100 * r['sizing_probe_error']:+.1f} | "
        f"{r['probe_wall_s']:.1f} ({100 * r['probe_share']:.1f} %) | "
        f"{r['probe']['t2']:.4f} / {r['run']['t2_median']:.4f} | "
        f"{r['probe']['init']:.1f} / {r['run']['init_s']:.1f} |"
    )


def ranking(rows: list[dict[str, Any]]) -> dict[str, bool]:
    out = {}
    for name in sorted({r["workload"] for r in rows}):
        mine = [r for r in rows if r["workload"] == name]
        by_pred = [r["case"] for r in sorted(mine, key=lambda r: r["predicted"]["value"])]
        by_real = [r["case"] for r in sorted(mine, key=lambda r: r["real_s"])]
        out[name] = by_pred == by_real
    return out


def report(rows: list[dict[str, Any]], command: str, probe_before_run: bool = True) -> str:
    errors = [abs(r["error"]) for r in rows]
    early = [abs(r["sizing_probe_error"]) for r in rows]
    which = (
        "a probe taken just before the run"
        if probe_before_run
        else "the probe that sized the datasets"
    )
    lines = [
        f"Command: `{command}`",
        "",
        f"Predicted = iteration-based formula with validation from {which} (t2 = median of "
        "iterations 2..k, 90 % interval); real = process start to end of the last epoch of a "
        "real training run in its own process. Probe and run t2 are the median steady "
        "iteration of each; init is process start to first batch ready (probe: data "
        "preparation scaled to the run's dataset size). Sizing-probe error = the error of the "
        "prediction from the first round of probes, taken before all runs (up to 30 min "
        "earlier).",
        "",
        "| case | n_train / n_val | epochs | predicted s (interval) | real s | error % | inside | "
        "sizing-probe error % | probe wall s (% of run) | t2 probe / run s | "
        "init probe / run s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *[format_row(r) for r in rows],
        "",
        f"Median |error| {100 * statistics.median(errors):.1f} %, worst {100 * max(errors):.1f} % "
        f"(sizing probes: median {100 * statistics.median(early):.1f} %, worst "
        f"{100 * max(early):.1f} %), "
        f"inside interval {sum(r['inside'] for r in rows)}/{len(rows)}, "
        f"max probe share {100 * max(r['probe_share'] for r in rows):.1f} %. "
        "Ranking (order of predicted = order of real runtimes): "
        + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in ranking(rows).items())
        + ".",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 tiny cases (~30 s)")
    parser.add_argument("--cases", help="comma-separated workload:batch:threads")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=10, help="probe iterations k")
    parser.add_argument("--target-seconds", type=float, default=None)
    parser.add_argument("--max-probe-share", type=float, default=0.02)
    parser.add_argument(
        "--probe-before-run",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="predict each run from a probe taken just before it (default), not from the "
        "probe that sized the datasets",
    )
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument("--_full-run", dest="full_run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.full_run:
        print(json.dumps(full_run(json.loads(args.full_run))))
        return
    started = time.time()
    rows = run(args)
    command = "python benchmarks/iteration_model.py " + " ".join(sys.argv[1:])
    text = report(rows, command.strip(), args.probe_before_run)
    text += f"\n\nBenchmark wall time {time.time() - started:.0f} s."
    from docs_section import publish  # the benchmarks beside it

    publish(SECTION, text, args.write_docs, rows, args.json, DOCS)


if __name__ == "__main__":
    main()
