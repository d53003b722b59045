"""Search efficiency: how many configurations the study probes before it finds the optimum.

    python benchmarks/search_efficiency.py [--seeds 50] [--samplers tpe,random,gp,nsga2,skopt]
        [--modes screen,screen+pb,sampler] [--budget 1.0] [--max-trials 200]
        [--slow-seeds 5] [--slow-max-trials 64] [--json]

The study (``advisor.study.run.run_suggest``, the loop behind ``advisor suggest``) runs on a replay
back end (``advisor.evaluation.replay``) serving a fixed table of 8 machines x 4 batch sizes = 32
(machine, batch) configurations for ``resnet50`` (CIFAR-10 shape, 50,000 / 10,000 samples,
its default 30 epochs and default batch sizes 64-512) with ``--budget`` (objective: the fastest
run within the budget). For each sampler and seed we count the distinct configurations probed
up to and including the true optimum (computed from the table beforehand). Target: with the
default sampler, the optimum is found after probing <= 30 % of the configurations in >= 90 %
of seeds. For reference, a blind search that never repeats a configuration meets "<= 30 %" in
30 % of seeds.

Modes:

- ``screen`` (the product's default whenever the back end can predict every configuration
  cheaply): the planner probes configurations best-first by predicted run time among those
  whose optimistic bound can still win; the sampler chooses only the hyperparameters, so it
  has no say in which configuration is probed. The seed also draws the screen's prediction
  errors (below): each seed is a different model error. Probe budget lifted.
- ``screen+pb``: the same with the default probe budget (10 % of ``--budget``), i.e. exactly
  the product's defaults; a run may stop ("probe budget spent") before the optimum. Default
  sampler only.
- ``sampler only`` (``screen=False``): the sampler chooses machine, batch size and
  hyperparameters; the seed is the sampler's seed. Probe budget lifted.

The table is a test fixture, not a claim. Machines and prices are real catalog rows: p2.xlarge
(1x K80), p3.2xlarge (1x V100), p3.8xlarge (4x V100, NVLink) from the 2021-02 snapshot;
g4dn.xlarge (1x T4), g5.xlarge (1x A10G), g5.12xlarge (4x A10G, PCIe), g6e.xlarge (1x L40S),
p4d.24xlarge (8x A100, NVLink) from 2026-11; on demand only (spot off, this machine left out,
so the 32 configurations are exactly the candidates). Phase times (init, first and steady
iteration, validation passes) are shaped like the performance model in docs/calibration.md:
per-sample time = 7.8 GFLOP (ResNet-50 at 32x32, forward + backward) / (peak x the cited
efficiency: K80 0.28, T4 0.375, V100 0.575 of FP32; Ampere/Ada 0.148 of TF32), slowed by
(1 + b_half / per-GPU batch) for under-filled GPUs; a 15 ms per-step host dispatch floor;
7 us per sample of host input; for several GPUs a ring all-reduce of 94 MB of gradients
(NVLink 0.8, PCIe 0.5 of the link), 0.5 ms DDP overhead and a 5 % straggler term; 22 s
initialisation (+ NCCL set-up), 2 s first-iteration warm-up (5 s on K80). The replay turns
the phases into run times with the iteration-time model, as for real probes; probe durations
are 8 iterations + 2 validation passes. Screen predictions: true run time x exp(e),
e ~ N(0, 0.25) per machine + N(0, 0.08) per configuration (a systematic per-accelerator error
plus noise), interval [value / 2, value x 2] (the model's GPU factor); a truth outside that
interval may be pruned by the planner and then never found.

Each run stops as soon as the optimum has been probed (the progress callback raises; the
trials already told are kept), after ``--max-trials`` (``--slow-max-trials`` and
``--slow-seeds`` for gp and skopt, which take 0.1-1 s per trial), or when the study stops by
itself. Storage is in memory (probe counts do not depend on it).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from advisor.evaluation.replay import ReplayBackend
from advisor.options import SuggestOptions
from advisor.study.run import run_suggest
from advisor.study.samplers import SAMPLERS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_efficiency_table import (
    DEFAULT_BUDGET,
    DEFAULT_SAMPLER,
    MODEL,
    SLOW_SAMPLERS,
    TARGET_SEEDS,
    TARGET_SHARE,
    make_table,
    space,
    truth,
)


class _Found(Exception):
    """Raised from the progress callback once the optimum has been probed."""


def probes_to_optimum(
    sampler: str,
    seed: int,
    screen: bool,
    budget: float,
    optimum: tuple[str, int],
    rows: dict[tuple[str, int], tuple[float, float, float]],
    max_trials: int,
    lift_probe_budget: bool = True,
) -> dict[str, Any]:
    """One study: distinct configurations probed up to the optimum (None: not found)."""
    import optuna

    sp = space()
    table = make_table(sp.batch_sizes, screen_seed=seed if screen else None)
    backend = ReplayBackend(table)

    def progress(phase: str, i: int, n: int) -> None:
        if phase == "trials" and optimum in backend.probed:
            raise _Found

    opts = SuggestOptions(
        model=MODEL,
        space=sp,
        budget_usd=budget,
        probe_budget_usd=1e9 if lift_probe_budget else None,
        sampler=sampler,
        seed=seed,
        trials=max_trials,
        screen=screen,
        study_name=f"efficiency-{sampler}-{seed}-{screen}",
    )
    stop = "found"
    try:
        outcome = run_suggest(
            opts, backend=backend, progress=progress, storage=optuna.storages.InMemoryStorage()
        )
        stop = outcome.stop_reason
        if screen and not outcome.guided:
            raise RuntimeError("the screen was not used")
    except _Found:
        pass
    probed = backend.probed
    found = optimum in probed
    n = probed.index(optimum) + 1 if found else None
    spent = sum(rows[k][2] for k in probed[: n or len(probed)])
    return {
        "seed": seed,
        "probes": n,
        "evaluations": backend.evaluations,
        "probe_usd": spent,
        "stop": stop,
    }


def _percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (inf counts as larger than everything)."""
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def summarise(runs: list[dict[str, Any]], n_configs: int) -> dict[str, Any]:
    limit = TARGET_SHARE * n_configs
    probes = [math.inf if r["probes"] is None else float(r["probes"]) for r in runs]
    meets = sum(p <= limit for p in probes) / len(probes)

    def num(x: float) -> float | None:
        return None if math.isinf(x) else x

    found_usd = [r["probe_usd"] for r in runs if r["probes"] is not None]
    return {
        "seeds": len(runs),
        "found_share": sum(r["probes"] is not None for r in runs) / len(runs),
        "median_probes": num(statistics.median(probes)),
        "p90_probes": num(_percentile(probes, 0.9)),
        "share_of_seeds_within_target": meets,
        "target_met": meets >= TARGET_SEEDS,
        "median_trials": statistics.median(r["evaluations"] for r in runs),
        "median_probe_usd_to_optimum": statistics.median(found_usd) if found_usd else None,
        "runs": runs,
    }


# (label, screen, probe budget lifted, only the default sampler)
MODES = {
    "screen": ("screen", True, True, False),
    "screen+pb": ("screen+pb", True, False, True),
    "sampler": ("sampler only", False, True, False),
}


def run(
    seeds: int = 50,
    samplers: tuple[str, ...] = SAMPLERS,
    slow_seeds: int = 5,
    budget: float = DEFAULT_BUDGET,
    max_trials: int = 200,
    slow_max_trials: int = 64,
    modes: tuple[str, ...] = tuple(MODES),
) -> dict[str, Any]:
    """Every (mode, sampler) over its seeds; see the module docstring."""
    sp = space()
    table = make_table(sp.batch_sizes)
    t = truth(table, budget)
    n_configs = len(t["rows"])
    probe_budget = SuggestOptions(model=MODEL, budget_usd=budget).resolved_probe_budget
    opt = t["optimum"]

    def describe(key: tuple[str, int]) -> dict[str, Any]:
        runtime, cost, _ = t["rows"][key]
        return {
            "machine": key[0],
            "batch_size": key[1],
            "runtime_s": round(runtime, 1),
            "cost_usd": round(cost, 4),
        }

    results = []
    for mode in modes:
        label, screen, lifted, default_only = MODES[mode]
        for sampler in samplers:
            if default_only and sampler != DEFAULT_SAMPLER:
                continue
            slow = sampler in SLOW_SAMPLERS
            n_seeds = min(seeds, slow_seeds) if slow else seeds
            cap = min(max_trials, slow_max_trials) if slow else max_trials
            start = time.perf_counter()
            runs = [
                probes_to_optimum(sampler, s, screen, budget, opt, t["rows"], cap, lifted)
                for s in range(n_seeds)
            ]
            summary = summarise(runs, n_configs)
            summary.update(
                mode=label,
                sampler=sampler,
                max_trials=cap,
                reduced=n_seeds < seeds or cap < max_trials,
                wall_s=round(time.perf_counter() - start, 2),
            )
            results.append(summary)
    return {
        "workload": MODEL,
        "budget_usd": budget,
        "default_probe_budget_usd": probe_budget,
        "configurations": n_configs,
        "feasible_configurations": t["feasible"],
        "target": f"<= {TARGET_SHARE:.0%} of configurations probed in >= {TARGET_SEEDS:.0%} "
        f"of seeds (default sampler, {DEFAULT_SAMPLER})",
        "target_probes": math.floor(TARGET_SHARE * n_configs),
        "optimum": {**describe(opt), "gap_to_second_feasible": round(t["gap_to_second"], 4)},
        "fastest_overall": describe(min(t["rows"], key=lambda k: t["rows"][k][0])),
        "cheapest_overall": describe(min(t["rows"], key=lambda k: t["rows"][k][1])),
        "seeds": seeds,
        "max_trials": max_trials,
        "results": results,
    }


def _fmt(x: float | None, spec: str = ".0f") -> str:
    return "-" if x is None else format(x, spec)


def _print(res: dict[str, Any]) -> None:
    o, f, c = res["optimum"], res["fastest_overall"], res["cheapest_overall"]
    print(
        f"Search efficiency: {res['workload']}, --budget {res['budget_usd']} (fastest run within "
        f"it), {res['configurations']} configurations ({res['feasible_configurations']} within "
        "the budget)."
    )
    print(
        f"optimum: {o['machine']} batch {o['batch_size']}: {o['runtime_s']:.0f} s, "
        f"USD {o['cost_usd']:.3f} (the next feasible one is {o['gap_to_second_feasible']:.1%} "
        f"slower); fastest overall: {f['machine']} b{f['batch_size']} {f['runtime_s']:.0f} s "
        f"USD {f['cost_usd']:.3f}; cheapest: {c['machine']} b{c['batch_size']} "
        f"{c['runtime_s']:.0f} s USD {c['cost_usd']:.3f}."
    )
    print(
        f"target: {res['target']}, i.e. <= {res['target_probes']} probes. probes = distinct "
        "(machine, batch) evaluated up to and including the optimum."
    )
    head = (
        f"{'mode':<12} {'sampler':<7} {'seeds':>6} {'found':>6} {'median':>7} {'p90':>5} "
        f"{'<=30%':>6} {'target':>7} {'trials':>6} {'probe USD':>9} {'wall s':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in res["results"]:
        seeds = f"{r['seeds']}{'*' if r['reduced'] else ''}"
        print(
            f"{r['mode']:<12} {r['sampler']:<7} {seeds:>6} {r['found_share']:>6.0%} "
            f"{_fmt(r['median_probes'], '.1f'):>7} {_fmt(r['p90_probes']):>5} "
            f"{r['share_of_seeds_within_target']:>6.0%} "
            f"{'met' if r['target_met'] else 'NOT met':>7} {r['median_trials']:>6.0f} "
            f"{_fmt(r['median_probe_usd_to_optimum'], '.3f'):>9} {r['wall_s']:>7.1f}"
        )
    for r in res["results"]:
        if r["reduced"]:
            print(
                f"* {r['mode']}, {r['sampler']}: {r['seeds']} seeds, at most {r['max_trials']} "
                f"trials per run (slow sampler; --slow-seeds, --slow-max-trials)."
            )
    print(
        "screen: machine and batch chosen best-first from the screen (the product's default), "
        "the sampler chooses only hyperparameters; screen+pb: the same with the default probe "
        f"budget (10 % of --budget = USD {res['default_probe_budget_usd']:.2f}) instead of an "
        "unlimited one; sampler only: no screen, the sampler chooses everything. found: share "
        "of seeds that probed the optimum; median/p90: probes until then ('-': not found in "
        "that share of seeds); <=30%: share of seeds within the target; trials: median trials "
        "run; probe USD: median probe money charged until the optimum was probed."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--samplers", default=",".join(SAMPLERS))
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET, help="USD")
    parser.add_argument("--max-trials", type=int, default=200)
    parser.add_argument(
        "--slow-seeds", type=int, default=5, help="seeds for the slow samplers (gp, skopt)"
    )
    parser.add_argument(
        "--slow-max-trials", type=int, default=64, help="trial cap for the slow samplers"
    )
    parser.add_argument(
        "--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    samplers = tuple(s.strip() for s in args.samplers.split(",") if s.strip())
    for s in samplers:
        if s not in SAMPLERS:
            parser.error(f"unknown sampler {s!r}; choose from {', '.join(SAMPLERS)}")
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    for m in modes:
        if m not in MODES:
            parser.error(f"unknown mode {m!r}; choose from {', '.join(MODES)}")
    res = run(
        args.seeds,
        samplers,
        args.slow_seeds,
        args.budget,
        args.max_trials,
        args.slow_max_trials,
        modes,
    )
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        _print(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
