"""Does the same command give the same answer? Runs `advisor suggest` N times, each in a fresh
ADVISOR_HOME (every probe taken anew), and prints each run's recommendation, its time, the
probes' contention and the tally.

    python benchmarks/same_answer.py [--runs 10] [--load 2] [-- extra suggest options]

``--load N`` keeps N busy processes (one spinning Python loop each) running for the whole
benchmark, so every probe is timed on a machine whose cores other work keeps busy (issue #36:
the answer must not move with the probes' noise). The machine's own load average at each run's
start is printed too: on a shared machine the cores are busy before the benchmark adds any.

Each run also prints where its time band ended (issue #36: in the time-cost front's widest gap
between 5 % and 25 % of the fastest; the widest and next widest gaps say how clearly), its
cost band (5 %, or 25 % when a probe shared the CPU), and what the quiet machine's cost band
would have recommended from the same rows. The default command is `advisor suggest --model fcn --budget 5`; options after `--` replace
`--budget 5`. A differing recommendation is printed with its time next to the majority's, so
the size of the disagreement is seen (and whether the tie rule or the probes moved it).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def one_run(advisor: str, extra: list[str], save: Path | None = None) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="advisor-same-"))
    try:
        load = os.getloadavg()[0]
        started = time.perf_counter()
        done = subprocess.run(
            [advisor, "suggest", "--model", "fcn", *extra, "--json"],
            capture_output=True,
            text=True,
            env={**os.environ, "ADVISOR_HOME": str(home)},
            timeout=1800,
        )
        wall = time.perf_counter() - started
        if done.returncode != 0:
            return {"error": done.stderr.strip().splitlines()[-1:], "wall_s": wall, "load": load}
        report = json.loads(done.stdout)
        if save is not None:  # the whole report, to study what differed
            save.mkdir(parents=True, exist_ok=True)
            (save / f"run-{time.time_ns()}.json").write_text(done.stdout)
        rec = report["recommended"]
        band = report.get("tie_band") or {}  # issue #36: absent before the measured band
        quiet = band.get("pick_at_quiet_band") or rec
        return {
            "band": report.get("tie_share"),
            "edge": band.get("edge"),
            "gaps": (band.get("gap"), band.get("next_gap")),
            "quiet_pick": (quiet["machine"], quiet["batch_size"]),
            "machine": rec["machine"],
            "batch": rec["batch_size"],
            "runtime_s": rec["runtime_s"]["value"],
            "cost_usd": rec["cost_usd"]["value"],
            "tied": (report.get("confidence") or {}).get("tied"),
            "contended": len(report.get("contention_notes") or []),
            "wall_s": wall,
            "load": load,
        }
    finally:
        shutil.rmtree(home, ignore_errors=True)


def busy(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` processes that keep one core busy each until terminated."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--advisor", default=shutil.which("advisor") or "advisor")
    parser.add_argument("--save", type=Path, help="keep each run's JSON report in this folder")
    parser.add_argument("--load", type=int, default=0, help="busy processes kept running")
    parser.add_argument("extra", nargs="*", default=["--budget", "5"])
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the busy processes end too
    spinners = busy(args.load)
    try:
        runs = _runs(args)
    finally:
        for s in spinners:
            s.terminate()
            s.wait()
    _tally(runs)


def _runs(args: argparse.Namespace) -> list[dict[str, Any]]:
    runs = []
    for i in range(args.runs):
        r = one_run(args.advisor, args.extra, args.save)
        runs.append(r)
        if "error" in r:
            print(f"run {i + 1}: failed: {r['error']}", flush=True)
            continue
        print(
            f"run {i + 1}: {r['machine']} batch {r['batch']}: {r['runtime_s']:.1f} s, "
            f"USD {r['cost_usd']:.4f}; {r['tied']} in its tie band; {r['contended']} "
            f"contended probe(s); band {r['band']:.0%} (the 5 % band's pick: "
            f"{r['quiet_pick'][0]} b{r['quiet_pick'][1]}); {r['wall_s']:.0f} s wall at load "
            f"{r['load']:.1f}",
            flush=True,
        )
    return runs


def _edge(r: dict[str, Any]) -> str:
    """Where the time band ended and the gaps that put it there (absent before issue #36's
    third round)."""
    if r.get("edge") is None:
        return ""
    gap, following = r["gaps"]
    return f" (edge +{r['edge']:.1%}, widest gap {gap:.1%}, next {following:.1%})"


def _tally(runs: list[dict[str, Any]]) -> None:
    picks = collections.Counter((r["machine"], r["batch"]) for r in runs if "error" not in r)
    print("tally:", ", ".join(f"{m} b{b}: {n}" for (m, b), n in picks.most_common()))
    quiet = collections.Counter(r["quiet_pick"] for r in runs if "error" not in r)
    print(
        "tally of the quiet band's picks from the same rows:",
        ", ".join(f"{m} b{b}: {n}" for (m, b), n in quiet.most_common()),
    )
    if len(picks) > 1:
        (top, _), *_ = picks.most_common()
        ref = next(r for r in runs if (r.get("machine"), r.get("batch")) == top)
        for r in runs:
            if "error" not in r and (r["machine"], r["batch"]) != top:
                print(
                    f"  differs: {r['machine']} b{r['batch']} {r['runtime_s']:.1f} s vs "
                    f"{ref['runtime_s']:.1f} s ({r['runtime_s'] / ref['runtime_s'] - 1:+.1%})"
                )


if __name__ == "__main__":
    main()
