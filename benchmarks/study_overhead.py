"""Per-trial overhead of the study when every probe is already known (target <= 20 ms/trial).

Runs ``advisor.study.run.run_suggest`` -- the real study loop behind ``advisor suggest`` -- on a
replay back end (``advisor.evaluation.replay``) whose entries carry phase times, so each trial still runs
the iteration-time model, the scoring (prices, spot overhead, constraints) and Optuna's
ask/tell with the trial attributes the report reads, but no probe. What is timed is therefore
the study's own overhead: sampler + storage + scoring + iteration-time model.

The candidate set is what the product's default space gives: every machine of the 2026-11
catalog snapshot, on demand and on spot, plus this machine, x the 4 batch sizes of the default
``fcn`` space (``advisor suggest --model fcn --budget 5``). The phase times are a fixture
shaped from the accelerators' catalog peaks (see ``_phases``), not a claim about the machines.
The probe budget is lifted so that every run reaches ``--trials`` (the default probe budget
would stop the study after a few probes, since every probe is charged whatever its source).

Rows: SQLite (the default storage: a file, WAL) and in-memory storage, each without the screen
(the sampler chooses every trial, so the study runs exactly ``--trials`` trials) and with the
screen (the product's default: machine and batch best-first from the screen; the study stops
when converged, so it may run fewer trials). ms/trial is the trial loop's wall time divided by
the trials it ran; set-up (study creation, screen) is shown apart. An unreported 8-trial run
warms up the imports first. Timings are of this run on this machine only.

    python benchmarks/study_overhead.py [--trials 200] [--sampler tpe] [--objective time] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from advisor.probes.result import PhaseTimes
from advisor.providers.catalog import load, local_machine
from advisor.providers.catalog._types import InstanceType
from advisor.search_spaces.loader import default_space
from advisor.search_spaces.space import MachineFilter
from advisor.search_spaces.workloads import get as get_workload

from advisor.evaluation.contract import probe_duration_s
from advisor.evaluation.replay import ReplayBackend, ReplayEntry, ReplayTable
from advisor.intervals import Interval
from advisor.options import SuggestOptions
from advisor.prediction.run.iteration_model import estimate
from advisor.study.run import run_suggest

TARGET_MS = 20.0
MODEL = "fcn"
BUDGET_USD = 5.0
SNAPSHOT = "2026-11"
FLOP_PER_SAMPLE = 30e6  # fcn forward + backward, order of magnitude (fixture)
DISPATCH_S = 3e-3  # eager per-step host launch floor on an accelerator (~100 ops x 30 us)
INPUT_S = 5e-6  # host input pipeline per sample
ITERATIONS = 8  # probe iterations (the CLI default)


def _flops(inst: InstanceType, catalog: Any) -> float:
    """Effective FLOP/s of one device (fixture: catalog peak x a per-kind efficiency)."""
    if inst.accelerator is None:  # CPU: physical cores x 3 GHz x 32 FLOP/cycle x 0.3
        return max(inst.vcpus // 2, 1) * 3e9 * 32 * 0.3
    spec = catalog.accelerator(inst.accelerator)
    if spec.tf32_tflops:
        return spec.tf32_tflops * 1e12 * 0.148
    if spec.bf16_tflops and spec.vendor.lower() == "google":
        return spec.bf16_tflops * 1e12 * 0.35
    return spec.fp32_tflops * 1e12 * 0.45


def _phases(inst: InstanceType, catalog: Any, batch: int, n_val: int) -> PhaseTimes:
    """Phase times for one (machine, batch): a fixture with plausible magnitudes."""
    n = max(inst.accelerator_count, 1)
    b = math.ceil(batch / n)
    compute = b * FLOP_PER_SAMPLE / _flops(inst, catalog)
    gpu = inst.accelerator is not None
    device = max(DISPATCH_S, compute) if gpu else compute
    sync = (1e-3 + 0.05 * device * math.sqrt(2 * math.log(n))) if n > 1 else 0.0
    t2 = device + b * INPUT_S + sync
    init = 15.0 + (2.0 if gpu else 0.0) + (2.0 + 0.25 * n if n > 1 else 0.0)
    v2 = math.ceil(n_val / batch) * (device / 3 + b * INPUT_S)

    def iv(x: float) -> Interval:
        return Interval(x, x * 0.97, x * 1.03)

    return PhaseTimes(iv(init), iv(t2 + 2.0), iv(t2), iv(v2 + 0.5), iv(v2), source="modelled")


def overhead_table(batch_sizes: tuple[int, ...]) -> ReplayTable:
    """Every catalog machine of the snapshot plus this machine, x ``batch_sizes``."""
    catalog = load(SNAPSHOT)
    wl = get_workload(MODEL)
    instances = [*catalog.instances, local_machine()]
    entries = []
    for inst in instances:
        for batch in batch_sizes:
            ph = _phases(inst, catalog, batch, wl.n_val)
            est = estimate(ph, wl.n_train, wl.n_val, wl.epochs_for(batch), batch)
            rt = est.runtime
            pred = Interval(rt.value * 1.1, rt.value / 2, rt.value * 2)
            entries.append(
                ReplayEntry(
                    inst.key,
                    batch,
                    rt,
                    predicted=pred,
                    phases=ph,
                    probe_s=probe_duration_s(ph, ITERATIONS),
                )
            )
    return ReplayTable(
        tuple(instances),
        tuple(entries),
        snapshot=f"replay-{SNAPSHOT}",
        source="benchmarks/study_overhead.py fixture (shaped from catalog peaks)",
        epochs=wl.default_epochs,
    )


def measure(
    table: ReplayTable,
    trials: int,
    sampler: str,
    storage: str,
    screen: bool,
    workdir: Path,
    objective: str | None = None,
) -> dict[str, Any]:
    """One run of the study; returns trial count and wall times (s)."""
    import optuna

    marks: list[float] = []

    def progress(phase: str, i: int, n: int) -> None:
        if phase == "trials":
            marks.append(time.perf_counter())

    space = default_space(MODEL)
    space = replace(space, machines=MachineFilter())  # the default: every machine, spot too
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / f"{storage}-{'screen' if screen else 'sampler'}.db"
    opts = SuggestOptions(
        model=MODEL,
        space=space,
        budget_usd=BUDGET_USD,
        objective=objective,
        probe_budget_usd=1e9,
        sampler=sampler,
        trials=trials,
        storage=f"sqlite:///{db}",
        screen=screen,
    )
    store = optuna.storages.InMemoryStorage() if storage == "memory" else None
    start = time.perf_counter()
    outcome = run_suggest(opts, backend=ReplayBackend(table), progress=progress, storage=store)
    total = time.perf_counter() - start
    n = len(outcome.study.trials)
    loop = marks[-1] - marks[0] if marks else 0.0
    # marks[i] is the start of trial i (the last mark: the end of the loop).
    q = max(n // 4, 1)
    first_q = (marks[q] - marks[0]) / q if n >= 4 else None
    last_q = (marks[n] - marks[n - q]) / q if n >= 4 and len(marks) > n else None
    return {
        "storage": "sqlite (file, WAL)" if storage == "sqlite" else "in memory",
        "mode": "screen (best-first)" if outcome.guided else "sampler only",
        "sampler": sampler,
        "trials": n,
        "stop_reason": outcome.stop_reason,
        "setup_s": round(total - loop, 4),
        "loop_s": round(loop, 4),
        "total_s": round(total, 4),
        "ms_per_trial": round(1e3 * loop / n, 3) if n else None,
        "ms_per_trial_with_setup": round(1e3 * total / n, 3) if n else None,
        "ms_per_trial_first_quarter": None if first_q is None else round(1e3 * first_q, 3),
        "ms_per_trial_last_quarter": None if last_q is None else round(1e3 * last_q, 3),
        "ratio_to_target": round(1e3 * loop / n / TARGET_MS, 4) if n else None,
        "meets_target": bool(n) and 1e3 * loop / n <= TARGET_MS,
    }


def run(trials: int = 200, sampler: str = "tpe", objective: str | None = None) -> dict[str, Any]:
    """All rows: SQLite and in-memory storage, each without and with the screen."""
    space = default_space(MODEL)
    table = overhead_table(space.batch_sizes)
    rows = []
    with tempfile.TemporaryDirectory(prefix="advisor-overhead-") as tmp:
        # Warm-up (not reported): first imports of SQLAlchemy and the sampler internals.
        measure(table, min(trials, 8), sampler, "sqlite", True, Path(tmp) / "warm-up", objective)
        for storage in ("sqlite", "memory"):
            for screen in (False, True):
                rows.append(measure(table, trials, sampler, storage, screen, Path(tmp), objective))
    n_cand = sum(2 if i.spot_usd_per_h and i.provider != "local" else 1 for i in table.instances)
    return {
        "target_ms_per_trial": TARGET_MS,
        "trials_asked": trials,
        "sampler": sampler,
        "workload": MODEL,
        "budget_usd": BUDGET_USD,
        "objective": objective or "time",
        "candidates": n_cand,
        "configurations": n_cand * len(space.batch_sizes),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "rows": rows,
    }


def _print(res: dict[str, Any]) -> None:
    print(
        f"Study per-trial overhead, probes replayed: workload {res['workload']}, "
        f"--budget {res['budget_usd']}, objective {res['objective']}, sampler {res['sampler']}, "
        f"{res['candidates']} machine candidates x batch sizes = "
        f"{res['configurations']} configurations; target <= {res['target_ms_per_trial']:.0f} ms "
        "per trial."
    )
    head = (
        f"{'storage':<19} {'mode':<20} {'trials':>6} {'setup s':>8} {'loop s':>8} "
        f"{'total s':>8} {'ms/trial':>9} {'1st q':>7} {'last q':>7} {'x target':>9}  met"
    )
    print(head)
    print("-" * len(head))
    for r in res["rows"]:
        ms = "-" if r["ms_per_trial"] is None else f"{r['ms_per_trial']:.2f}"
        ratio = "-" if r["ratio_to_target"] is None else f"{r['ratio_to_target']:.2f}"
        print(
            f"{r['storage']:<19} {r['mode']:<20} {r['trials']:>6} {r['setup_s']:>8.2f} "
            f"{r['loop_s']:>8.2f} {r['total_s']:>8.2f} {ms:>9} "
            f"{_ms(r['ms_per_trial_first_quarter']):>7} {_ms(r['ms_per_trial_last_quarter']):>7} "
            f"{ratio:>9}  "
            f"{'yes' if r['meets_target'] else 'NO'}"
        )
    for r in res["rows"]:
        if r["trials"] < res["trials_asked"]:
            print(f"({r['storage']}, {r['mode']}: stopped after {r['trials']}: {r['stop_reason']})")
    print(
        "ms/trial = trial-loop wall time / trials (set-up: study creation and screen, apart); "
        "1st q / last q: ms/trial over the first and the last quarter of the trials; "
        "x target = ms/trial / 20 ms."
    )


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--sampler", default="tpe")
    parser.add_argument(
        "--objective", choices=("time", "cost", "pareto"), help="default: time (from --budget)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    res = run(args.trials, args.sampler, args.objective)
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        _print(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
