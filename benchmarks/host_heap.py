"""What a CPU training step holds in resident memory beyond its tensors (issue #45, stop 65).

``advisor.train`` and the probes set glibc to serve every block from its heap and keep what is
freed (``advisor.probes.allocator.keep_freed_memory``: 2.7x faster steps on this machine,
fcn at batch 2048). The heap then keeps holes between live blocks, so the process's resident
memory grows by more than the step's tensors. A CPU machine's RAM must hold that, not the
tensors alone.

Each case runs in a fresh process as ``advisor.train`` runs it: its allocator setting and
threads (``torch_loop.configure``), the workload's setup (``build_setup``), the plan's step
(``plan_step.make_step``, the plain float32 plan). Measured there:

- ``base``: the process's resident memory (``VmRSS``) with the setup and one batch built,
  before the first step: the interpreter, the libraries, the model, the data;
- ``grown``: the resident high-water mark (``VmHWM``) over ``--steps`` steps, less ``base``;
- ``tensors``: the step's peak of allocated bytes (``memory_measure.cpu_peak``: the profiler's
  allocator records), less the bytes live before the first step (parameters and batch);
- ``retention`` = ``grown`` / ``tensors``; ``--allocator default`` runs the same with glibc's
  defaults, for comparison.

    python benchmarks/host_heap.py [--cases fcn:256,fcn:2048,...] [--allocator kept|default]
        [--steps 4] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

CASES = (
    "fcn:256", "fcn:1024", "fcn:2048", "simple-cnn:512", "simple-cnn:2048",
    "examples.transformers:gpt2_mini:8", "examples.transformers:gpt2_mini:32",
)  # fmt: skip
ROOT = Path(__file__).resolve().parents[1]


def _status(field: str) -> int:
    """``field`` of /proc/self/status in bytes (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(workload: str, batch: int, allocator: str, steps: int) -> dict[str, Any]:
    """One case in this process (see the module docstring)."""
    import warnings

    from advisor.probes import allocator as heap

    if allocator == "kept":
        heap.keep_freed_memory()  # before torch allocates anything, as configure does first
    import torch
    from advisor.probes.plan_step import make_step
    from advisor.probes.torch_loop import build_setup, split_batch
    from memory_measure import cpu_peak, local_bytes

    from advisor.prediction.step.plan import TrainingPlan

    torch.set_num_threads(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setup, _, _ = build_setup(workload, batch, batch * 4, 8, 0, {})
    x, y = split_batch(next(iter(setup.train_loader)))
    step = make_step(TrainingPlan(), "cpu")
    setup.model.train()
    before = local_bytes(setup.model, setup.optimizer, (x, y))
    base = _status("VmRSS")
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step(setup, (x, y), "cpu")
        times.append(time.perf_counter() - start)
    grown = _status("VmHWM") - base
    peak = cpu_peak(lambda: step(setup, (x, y), "cpu"), setup, (x, y), warm_up=0)
    tensors = peak - before
    return {
        "workload": workload, "batch": batch, "allocator": allocator, "base": base,
        "grown": grown, "tensors": tensors, "retention": grown / tensors,
        "steady_step_s": statistics.median(times[1:]),
    }  # fmt: skip


def run(case: str, allocator: str, steps: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", case, "--allocator", allocator,
         "--steps", str(steps)],
        capture_output=True, text=True, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
    )  # fmt: skip
    if out.returncode:
        raise SystemExit(f"{case}: {out.stderr.strip().splitlines()[-1]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--allocator", choices=("kept", "default"), default="kept")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        workload, batch = a.child.rsplit(":", 1)
        print(json.dumps(child(workload, int(batch), a.allocator, a.steps)))
        return
    rows = [run(c, a.allocator, a.steps) for c in a.cases.split(",")]
    mib = 2**20
    print(
        "| workload | batch | allocator | base MiB | grown MiB | tensors MiB | retention | step s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['workload']} | {r['batch']} | {r['allocator']} | {r['base'] / mib:.0f} | "
            f"{r['grown'] / mib:.0f} | {r['tensors'] / mib:.0f} | {r['retention']:.2f} | "
            f"{r['steady_step_s']:.3f} |"
        )
    ratios = [r["retention"] for r in rows]
    print(f"\nretention: median {statistics.median(ratios):.2f}, range {min(ratios):.2f}-"
          f"{max(ratios):.2f} over {len(rows)} cases")  # fmt: skip
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
