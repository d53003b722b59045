"""Figures for docs/reliability.md: processes sharing a study, a new storage created by many
processes at once, and Ctrl-C at random moments -- real `advisor suggest` processes on the
replay back end (the study tests' small table, each evaluation taking 0.4 s as a probe would).

    python benchmarks/reliability_figures.py [single|four|create N|ctrlc N] ...

Each figure is of this run on this machine only; nothing is stored.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna

from advisor.records import TrialRecord

ROOT = Path(__file__).resolve().parent.parent


def _setup() -> tuple[Path, Path, Path]:
    spec = importlib.util.spec_from_file_location("tables", ROOT / "tests/helpers/replay_tables.py")
    assert spec is not None and spec.loader is not None
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    work = Path(tempfile.mkdtemp(prefix="advisor-reliability-"))
    os.environ["ADVISOR_HOME"] = str(work / "home")
    table = work / "table.json"
    replace(tables.small_table(), delay_s=0.4).save(table)
    space = work / "space.yaml"
    space.write_text("workload: fcn\nbatch_sizes: [256, 512]\n")
    return work, table, space


def _cmd(table: Path, space: Path, db: Path) -> list[str]:
    return [
        sys.executable, "-m", "advisor.cli.main", "suggest", "--model", "fcn",
        "--objective", "pareto", "--probe-budget", "100", "--space", str(space),
        "--storage", f"sqlite:///{db}", "--backend", f"replay:{table}", "--json",
    ]  # fmt: skip


def _stats(db: Path, name: str) -> dict[str, Any]:
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    recs = [r for r in (TrialRecord.from_trial(t) for t in study.trials) if r is not None]
    evaluated = Counter((r.machine, r.batch_size) for r in recs)
    charged = Counter(
        (r.machine.removesuffix(":spot"), r.batch_size) for r in recs if r.probe_charged_usd > 0
    )
    return {
        "trials": len(study.trials),
        "duplicate_configs": sum(v - 1 for v in evaluated.values()),
        "probes_charged_twice": sum(v - 1 for v in charged.values()),
        "usd_charged": round(sum(r.probe_charged_usd for r in recs), 4),
    }


def _together(cmd: list[str], n: int) -> tuple[list[subprocess.Popen[str]], list[Any], float]:
    start = time.monotonic()
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(n)
    ]
    outs = [p.communicate() for p in procs]
    return procs, outs, time.monotonic() - start


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "four"
    n = int(argv[1]) if len(argv) > 1 else 8
    work, table, space = _setup()
    if what in ("single", "four"):
        db = work / f"{what}.db"
        procs, outs, wall = _together(_cmd(table, space, db), 1 if what == "single" else 4)
        reports = [json.loads(o) for o, _ in outs]
        print(
            what,
            {
                "wall_s": round(wall, 1),
                "exit": [p.returncode for p in procs],
                "new_per_process": [r["trials"]["new"] for r in reports],
                **_stats(db, reports[0]["study"]),
            },
        )
    elif what == "create":
        procs, outs, _ = _together(_cmd(table, space, work / "new.db"), n)
        print(
            "create",
            {
                "processes": n,
                "exit": dict(Counter(p.returncode for p in procs)),
                "tracebacks": sum("Traceback" in e for _, e in outs),
            },
        )
    elif what == "ctrlc":
        rng = random.Random(1)
        seen: Counter[str] = Counter()
        for i in range(n):
            db = work / f"c{i}.db"
            cmd = _cmd(table, space, db)
            p = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                start_new_session=True,
            )  # fmt: skip
            time.sleep(rng.uniform(2.5, 6.0))
            p.send_signal(signal.SIGINT)
            _out, err = p.communicate()
            consistent = all(
                t.state.is_finished()
                for s in optuna.get_all_study_summaries(f"sqlite:///{db}")
                for t in optuna.load_study(
                    study_name=s.study_name, storage=f"sqlite:///{db}"
                ).trials
            )
            again = subprocess.run(cmd, capture_output=True, text=True)
            what_happened = "report (interrupted)" if p.returncode == 0 else f"exit {p.returncode}"
            seen[what_happened] += 1
            seen["traceback"] += "Traceback" in err
            seen["consistent"] += consistent
            seen["re-run exit 0"] += again.returncode == 0
        print("ctrlc", {"tries": n, **seen})
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
