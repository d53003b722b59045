"""How long `advisor suggest --model fcn --budget 5` takes to its first answer, cold (a fresh
ADVISOR_HOME: every probe runs) and resumed (the same command again), and where the time goes.

Each run is the real CLI in its own process, timed from outside. The breakdown is read
afterwards from what the run stored, not from instrumentation:

- probes: each local probe's wall time, start-up (interpreter, imports, model build, first
  batch: ``init_s`` less the modelled data-preparation extension), timed iterations and
  validation, and whether it shared a process with the previous one;
- trials: the first trial's start to the last one's end (Optuna's timestamps);
- screening: the search's own wall time (the report's ``wall_s``) less the probes and trials;
- start-up and report: the command's wall time less the search's (imports, storage, report
  building and printing).

``--other PATH`` times another `advisor` executable too (an older checkout's), alternately
with this one in the same invocation, and prints the ratios. Run on an idle machine for
absolute figures; the load average is printed with them.

    python benchmarks/first_answer.py [--repeat 3] [--other /path/to/old/bin/advisor]

``--screen`` times the terminal's report instead (issue #36): the command without ``--json``,
its output read as it comes, the time to the first answer (the "first answer" block printed
from the operator trace while the local probes run; for an executable without it, the final
report is the first) and to the final answer (the command's end), cold, each run in a fresh
``ADVISOR_HOME``; with ``--other`` alternately. The command's CPU seconds at the first answer
are read from ``/proc/PID/stat`` as it appears; ``--first-only`` stops the command there (on
a loaded machine the final answer takes minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

COMMAND = ["suggest", "--model", "fcn", "--budget", "5", "--json"]


def _run(advisor: str, home: Path) -> tuple[float, dict[str, Any]]:
    """One `advisor suggest` in its own process: (wall seconds, its JSON report)."""
    started = time.perf_counter()
    done = subprocess.run(
        [advisor, *COMMAND],
        capture_output=True,
        text=True,
        env={**os.environ, "ADVISOR_HOME": str(home)},
        timeout=1800,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{advisor} failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, json.loads(done.stdout)


def _probes(db: Path) -> list[dict[str, Any]]:
    """The probes the run cached: batch size, wall, start-up, iterations, validation."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        rows = con.execute(
            "SELECT a.key, a.value_json FROM study_user_attributes a JOIN studies s "
            "ON a.study_id = s.study_id WHERE s.study_name = 'advisor-probe-cache'"
        ).fetchall()
    out = []
    for key, value in rows:
        data = json.loads(value)
        probe = data.get("probe", data)
        if not isinstance(probe, dict) or "iteration_s" not in probe:
            continue  # another kind of entry (an operator trace)
        fingerprint = probe.get("fingerprint") or {}
        extension = _data_extension(fingerprint.get("init_note", ""))
        out.append(
            {
                "key": key,
                "batch": probe["batch_size"],
                "status": probe["status"],
                "wall_s": probe.get("wall_s") or 0.0,
                "startup_s": max(0.0, (probe.get("init_s") or 0.0) - extension),
                "iterations": len(probe.get("iteration_s") or ()),
                "iterations_s": sum(probe.get("iteration_s") or ()),
                "validation_s": sum(probe.get("validation_s") or ()),
                "shared": "probe_process" in fingerprint,
                "others_cores": (fingerprint.get("contention") or {}).get("others_cores"),
            }
        )
    return sorted(out, key=lambda p: p["batch"])


def _data_extension(note: str) -> float:
    """The modelled extension of data preparation to the full data set, which ``init_s``
    includes but the probe did not spend ("... (+12.345 s)")."""
    if "(+" not in note:
        return 0.0
    try:
        return float(note.rsplit("(+", 1)[1].split(" s)")[0])
    except ValueError:
        return 0.0


def _trials_span(db: Path, study: str) -> float:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        first, last = con.execute(
            "SELECT MIN(t.datetime_start), MAX(t.datetime_complete) FROM trials t "
            "JOIN studies s ON t.study_id = s.study_id WHERE s.study_name = ?",
            (study,),
        ).fetchone()
    if not first or not last:
        return 0.0
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    from datetime import datetime

    return (datetime.strptime(last, fmt) - datetime.strptime(first, fmt)).total_seconds()


def measure(advisor: str, repeat: int) -> dict[str, Any]:
    """Cold and resumed runs of ``advisor`` (``repeat`` each), with the cold breakdown of the
    median cold run."""
    colds, resumed = [], []
    for _ in range(repeat):
        home = Path(tempfile.mkdtemp(prefix="advisor-bench-"))
        try:
            load = os.getloadavg()[0]
            wall, report = _run(advisor, home)
            db = home / "studies.db"
            probes = _probes(db)
            trials = _trials_span(db, report["study"])
            search = float(report["wall_s"])
            probe_s = sum(p["wall_s"] for p in probes)
            colds.append(
                {
                    "wall_s": wall,
                    "load": load,
                    "recommended": report["recommended"]["machine"],
                    "batch": report["recommended"]["batch_size"],
                    "probes": probes,
                    "probes_s": probe_s,
                    "trials_s": trials,
                    "screening_s": max(0.0, search - probe_s - trials),
                    "startup_and_report_s": max(0.0, wall - search),
                }
            )
            for _ in range(2):  # the first re-run keeps nothing new; both should be quick
                resumed.append(_run(advisor, home)[0])
        finally:
            shutil.rmtree(home, ignore_errors=True)
    colds.sort(key=lambda c: c["wall_s"])
    return {"cold": colds, "median_cold": colds[len(colds) // 2], "resumed": resumed}


def _print(name: str, m: dict[str, Any]) -> None:
    c = m["median_cold"]
    walls = ", ".join(f"{x['wall_s']:.1f}" for x in m["cold"])
    print(f"== {name}")
    print(f"cold: median {c['wall_s']:.1f} s (runs: {walls}; load average {c['load']:.1f})")
    print(f"  recommended {c['recommended']} batch {c['batch']}")
    print(f"  start-up and report {c['startup_and_report_s']:.1f} s")
    print(f"  probes {c['probes_s']:.1f} s:")
    for p in c["probes"]:
        others = "" if p["others_cores"] is None else f", others busy {p['others_cores']:.2f} cores"
        print(
            f"    batch {p['batch']:>5}: {p['wall_s']:.1f} s = start-up {p['startup_s']:.1f} s + "
            f"{p['iterations']} iterations {p['iterations_s']:.1f} s + validation "
            f"{p['validation_s']:.1f} s (+ rest){' [shared process]' if p['shared'] else ''}"
            f"{others}"
        )
    print(f"  screening (besides probes) {c['screening_s']:.1f} s")
    print(f"  trials {c['trials_s']:.1f} s")
    res = m["resumed"]
    print(
        f"resumed: median {statistics.median(res):.2f} s "
        f"(runs: {', '.join(f'{x:.2f}' for x in res)})"
    )


def _cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) process ``pid`` has used so far (``/proc/PID/stat``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def screen_times(advisor: str, first_only: bool = False) -> dict[str, Any]:
    """One cold run of the terminal command: seconds to the first answer and to the end, and
    the command's CPU seconds at the first answer (its process, interpreter start included;
    the first answer runs there before any probe child starts). ``first_only``: stop the
    command once the first answer is printed (SIGTERM; no final time)."""
    home = Path(tempfile.mkdtemp(prefix="advisor-bench-"))
    try:
        load = os.getloadavg()[0]
        started = time.perf_counter()
        first, early, first_cpu = None, False, None
        with subprocess.Popen(
            [advisor, *[c for c in COMMAND if c != "--json"]],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "ADVISOR_HOME": str(home), "COLUMNS": "200"},
        ) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                if first is None and line.strip():
                    first, first_cpu = time.perf_counter() - started, _cpu_s(proc.pid)
                    early = line.startswith("first answer")
                    if first_only and early:
                        proc.terminate()
                        break
        final = time.perf_counter() - started
        if proc.wait() != 0 and not (first_only and early):
            raise SystemExit(f"{advisor} failed ({proc.returncode})")
        return {"first_s": first if early else final, "final_s": None if first_only and early
                else final, "load": load, "early": early, "first_cpu_s": first_cpu}  # fmt: skip
    finally:
        shutil.rmtree(home, ignore_errors=True)


def screen_main(args: argparse.Namespace) -> None:
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(args.repeat):  # alternate, so both see the same machine
        for name, exe in (("this", args.advisor), ("other", args.other)):
            if exe is not None:
                r = screen_times(exe, args.first_only)
                runs.setdefault(name, []).append(r)
                cpu = r["first_cpu_s"]
                final = r["final_s"]
                print(
                    f"{name}: first answer {r['first_s']:.1f} s"
                    f"{'' if r['early'] else ' (the final report)'}"
                    f" ({'?' if cpu is None else f'{cpu:.1f}'} s CPU of the command), final "
                    f"{'not waited for' if final is None else f'{final:.1f} s'}, "
                    f"load average {r['load']:.1f}",
                    flush=True,
                )
    for name, rs in runs.items():
        first = statistics.median(r["first_s"] for r in rs)
        cpus = [r["first_cpu_s"] for r in rs if r["first_cpu_s"] is not None]
        finals = [r["final_s"] for r in rs if r["final_s"] is not None]
        print(
            f"{name}: median first answer {first:.1f} s"
            + (f" ({statistics.median(cpus):.1f} s CPU)" if cpus else "")
            + (f", final {statistics.median(finals):.1f} s" if finals else "")
            + f" ({len(rs)} runs)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="cold runs per executable")
    parser.add_argument("--advisor", default=shutil.which("advisor") or "advisor")
    parser.add_argument("--other", help="another advisor executable to time alternately")
    parser.add_argument("--screen", action="store_true", help="time the terminal's report")
    parser.add_argument(
        "--first-only", action="store_true", help="with --screen: stop at the first answer"
    )
    args = parser.parse_args()
    if args.screen:
        screen_main(args)
        return
    results: dict[str, dict[str, Any]] = {}
    for _ in range(args.repeat):  # alternate, so both see the same machine
        for name, exe in (("this", args.advisor), ("other", args.other)):
            if exe is None:
                continue
            m = measure(exe, 1)
            if name in results:
                results[name]["cold"] += m["cold"]
                results[name]["resumed"] += m["resumed"]
            else:
                results[name] = m
    for name, m in results.items():
        m["cold"].sort(key=lambda c: c["wall_s"])
        m["median_cold"] = m["cold"][len(m["cold"]) // 2]
        _print(f"{name}: {args.advisor if name == 'this' else args.other}", m)
    if "other" in results:
        this, other = results["this"], results["other"]
        cold = other["median_cold"]["wall_s"] / this["median_cold"]["wall_s"]
        res = statistics.median(other["resumed"]) / statistics.median(this["resumed"])
        print(f"ratios (other / this, same invocation): cold x{cold:.2f}, resumed x{res:.1f}")


if __name__ == "__main__":
    main()
