"""How much a busy machine moves this CPU's measured matrix-product rate (issue #46).

``measured_cpu_rate`` (``probes/operators/feasibility.py``) takes the fastest of 20 timed
512 x 512 float32 products, each after a 3 ms nap, on torch's threads and on one thread
(times the threads); before, the rate was the median of 7 products timed back to back. This script reads both in ``--processes`` fresh processes
(torch's threads: all cores), first on the machine as it is, then beside ``--busy`` processes
that spin on a core each (started and stopped here), and prints each reading's range and the
busy/quiet ratio of their medians, measured in this one run.

    python benchmarks/cpu_rate.py [--processes 5] [--busy 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import time

READ = """
import json, statistics, time, torch
from advisor.probes.operators.feasibility import measured_cpu_rate
a, b = torch.randn(512, 512), torch.randn(512, 512)
torch.mm(a, b)
old = []
for _ in range(7):
    s = time.perf_counter(); torch.mm(a, b); old.append(2 * 512**3 / (time.perf_counter() - s))
new = measured_cpu_rate()
print(json.dumps({"old": statistics.median(old), "new": new.value, "others": new.others_cores}))
"""


def _spin(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


def readings(processes: int) -> list[dict[str, float]]:
    """Both readings in ``processes`` fresh processes, one after another (GFLOP/s)."""
    out = []
    for _ in range(processes):
        text = subprocess.run([sys.executable, "-c", READ], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
        row = json.loads(text.strip().splitlines()[-1])
        out.append({k: (v / 1e9 if k != "others" else v) for k, v in row.items()})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--busy", type=int, default=2, help="spinning processes beside")
    args = parser.parse_args(argv)
    quiet = readings(args.processes)
    spinners = [multiprocessing.Process(target=_spin, args=(time.time() + 600,), daemon=True)
                for _ in range(args.busy)]  # fmt: skip
    for p in spinners:
        p.start()
    try:
        time.sleep(0.5)
        busy = readings(args.processes)
    finally:
        for p in spinners:
            p.terminate()
    for name, rows in (("quiet", quiet), (f"beside {args.busy} spinning", busy)):
        for k, what in (("old", "median of 7, back to back"), ("new", "measured_cpu_rate")):
            xs = [r[k] for r in rows]
            print(f"{name:>20}: {what:<26} {min(xs):6.0f}-{max(xs):6.0f} GFLOP/s, "
                  f"median {statistics.median(xs):6.0f}")  # fmt: skip
        others = [r["others"] for r in rows if r["others"] is not None]
        if others:
            print(f"{'':>20}  cores busy elsewhere: {min(others):.1f}-{max(others):.1f}")
    for k in ("old", "new"):
        ratio = statistics.median(r[k] for r in busy) / statistics.median(r[k] for r in quiet)
        print(f"busy / quiet, {k}: x{ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
