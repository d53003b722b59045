"""Where a local probe's resident memory goes (issue #46: ``suggest --model fcn`` peaks at
3.3-4 GB, nearly all of it the probe child at batch 2048).

Each case runs in a fresh process, as the probe child does: it imports torch, builds the
workload's setup with the probe's data (``batch x iterations`` training samples, the bounded
validation slice) and takes ``--steps`` training steps on it with the probe's own
``train_step``, reading the process's resident memory (``VmRSS``) and its peak (``VmHWM``)
after each phase. Two allocator settings are compared: the one every PyTorch probe and
training run set (``probes.allocator.keep_freed_memory``: the glibc heap serves every block
and keeps what is freed, so the steps do not fault fresh pages; the timing reason is in that
module), and the C library's default (large blocks mapped and unmapped each time: the resident
memory is then the live tensors). The difference is what keeping freed memory costs at that
batch; the default's step peak less the built setup is the step's own tensors.

    python benchmarks/probe_memory.py [--workload fcn] [--batch 2048] [--steps 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ITERATIONS = 8  # suggest's default --probe-iterations: the probe generates batch x 8 samples


def _status() -> dict[str, float]:
    """This process's resident memory and its peak, GB (1e9 bytes)."""
    out = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024 / 1e9
    return out


def case(workload: str, batch: int, steps: int, keep: bool) -> list[dict[str, object]]:
    """One fresh process's phases (run as ``--case``): what it held after each."""
    from advisor.probes import allocator

    if keep:
        allocator.keep_freed_memory()
    rows: list[dict[str, object]] = [{"phase": "start", **_status()}]
    import torch
    from advisor.probes.host import reset_peak_rss
    from advisor.probes.torch_loop import build_setup, train_step
    from advisor.search_spaces.workloads import get

    rows.append({"phase": "torch imported", **_status()})
    val = min(batch * 4, get(workload).n_val) or None  # the probe's bounded validation slice
    setup, _, _ = build_setup(workload, batch, batch * ITERATIONS, val, 0, {})
    setup.model.train()
    rows.append({"phase": "setup built (model, data)", **_status()})
    batches = iter(setup.train_loader)
    for i in range(steps):
        reset_peak_rss()
        train_step(setup, next(batches), torch.device("cpu"))
        rows.append({"phase": f"step {i + 1}", **_status()})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="fcn")
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--case", choices=("keep", "default"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(case(args.workload, args.batch, args.steps, args.case == "keep")))
        return 0
    load = os.getloadavg()[0]
    print(f"{args.workload} at batch {args.batch} ({args.batch * ITERATIONS} training samples), "
          f"{args.steps} steps, each setting in a fresh process; GB = 1e9 bytes; load {load:.1f}")  # fmt: skip
    print("| allocator | phase | resident GB | peak GB (since the phase began, steps) |")
    print("|---|---|---:|---:|")
    summary = {}
    for name in ("keep", "default"):
        done = subprocess.run(
            [sys.executable, __file__, "--case", name, "--workload", args.workload,
             "--batch", str(args.batch), "--steps", str(args.steps)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        rows = json.loads(done.stdout.splitlines()[-1])
        label = "freed memory kept (the probe's)" if name == "keep" else "C library default"
        for r in rows:
            print(f"| {label} | {r['phase']} | {r['VmRSS']:.2f} | {r['VmHWM']:.2f} |")
        built = next(float(r["VmRSS"]) for r in rows if str(r["phase"]).startswith("setup"))
        peak = max(float(r["VmHWM"]) for r in rows)
        summary[name] = (built, peak)
    (_, kp), (db, dp) = summary["keep"], summary["default"]
    print(
        f"\nthe step's own tensors (default peak - built): {dp - db:.2f} GB; "
        f"kept freed memory adds {kp - dp:.2f} GB at the peak ({kp:.2f} against {dp:.2f} GB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
