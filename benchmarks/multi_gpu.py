"""The data-parallel step per framework on published 1-8 GPU throughputs (issue #47).

Data (fit on some rows, report on the rest):
- ``data/gpu-throughput/``: Lambda's PyTorch ResNet-50 fp32 rows, 1-8 GPUs (DDP, one process
  per GPU; NVLink on SXM boards, PCIe otherwise);
- ``data/tf-benchmarks-2017/``: TensorFlow's 2017 rows, K80 (AWS p2.8xlarge, GCE: PCIe, two
  dies per board) and P100 (DGX-1: NVLink), 1-8 GPUs, one process driving every replica (the
  framework path the product calls ``dp``, as Keras MirroredStrategy). Built here: ResNet-50
  (the repository's network), VGG-16 and AlexNet (torchvision's layouts, written out below);
  Inception-v3 and ResNet-152 are not built and not used.

What is fitted, each on the rows named, with its leave-one-out error:
- ``STRAGGLER_CV`` (DDP's wait for the slowest replica) on Lambda's 2/4/8-GPU scaling;
- ``SERIAL_REPLICA_SHARE`` (one process's host work per extra replica) on TF's scaling;
- the Kepler and Pascal whole-model profiles (achieved shares of peak FLOP/s and bandwidth) on
  TF's 1-GPU rows (``generation_profile.py``).

n-GPU throughput is predicted from the measured 1-GPU throughput x n x t(1) / t(n), so the
scaling errors test the data-parallel terms alone. ``--no-fit`` predicts with the shipped
constants only (what ``--before`` runs on another checkout).

    python benchmarks/multi_gpu.py [--write-docs] [--no-fit]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from advisor.prediction.timing import accel
from advisor.prediction.timing import constants as C

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cross_gpu import Specs  # the benchmarks beside it
from docs_section import publish
from multi_gpu_data import (
    HERE,
    Row,
    constants,
    lambda_rows,
    machine_of,
    step_time,
    tf_rows,
)  # fmt: skip

SECTION = "## Data parallel per framework on published 1-8 GPU throughputs (issue #47)"


# --- the machines ----------------------------------------------------------------------------


def scaling(row: Row, one: Row, specs: Specs, **values: float) -> float:
    """n-GPU throughput: the measured 1-GPU one x n x t(1)/t(n)."""
    with constants(**values):
        t1, tn = step_time(row, specs, 1)["t2"], step_time(row, specs, row.n)["t2"]
    return one.throughput * row.n * t1 / tn


def log_err(pred: float, meas: float) -> float:
    return abs(math.log(pred / meas))


def fit_grid(name: str, grid: list[float], pairs: list[tuple[Row, Row]], specs: Specs) -> float:
    """The value of ``name`` in ``grid`` minimising the median |log error| of ``pairs``."""
    best = (math.inf, grid[0])
    for v in grid:
        errs = [log_err(scaling(r, one, specs, **{name: v}), r.throughput) for r, one in pairs]
        best = min(best, (statistics.median(errs), v))
    return best[1]


def summary(errors: list[float]) -> str:
    a = [abs(e) for e in errors]
    if not a:
        return "no rows"
    return f"median |error| {statistics.median(a):.1%}, worst {max(a):.1%} ({len(a)} rows)"


def pairs_of(rows: list[Row]) -> list[tuple[Row, Row]]:
    """Each n-GPU row with the 1-GPU row of its machine, model and batch."""

    def key(r: Row) -> tuple[Any, ...]:
        return (r.data, r.platform, r.gpu, r.model) + ((r.batch,) if r.data != "lambda" else ())

    ones = {key(r): r for r in rows if r.n == 1}
    return [(r, ones[key(r)]) for r in rows if r.n > 1 and key(r) in ones]


def link_kind(row: Row, specs: Specs) -> str:
    m, spec = machine_of(row, specs)
    try:
        return accel.link_of(spec, m).kind
    except TypeError:  # the model before issue #47: the spec's link only
        return accel.link_of(spec).kind


CV_GRID = [i * 0.005 for i in range(21)]
SERIAL_GRID = [i * 0.05 for i in range(21)]


def scaling_section(rows: list[Row], specs: Specs, fit: bool, lines: list[str]) -> dict[str, Any]:
    """Leave one machine size out and leave one model out: n-GPU throughput errors."""
    pairs = pairs_of(rows)
    by_data = {d: [p for p in pairs if p[0].data == d] for d in ("lambda", "tf2017")}
    names = {"lambda": "STRAGGLER_CV", "tf2017": "SERIAL_REPLICA_SHARE"}
    grids = {"lambda": CV_GRID, "tf2017": SERIAL_GRID}
    shipped = {"lambda": C.STRAGGLER_CV, "tf2017": getattr(C, "SERIAL_REPLICA_SHARE", 0.0)}
    errors: dict[tuple[str, str, str], list[float]] = {}
    fitted_all: dict[str, float] = {}
    lines += [
        "### Leave one machine size out (n-GPU throughput from the measured 1-GPU one)",
        "",
        "| data | machine | model | batch/GPU | GPUs | measured | predicted | error | "
        "constant fitted without this size |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for data, ps in by_data.items():
        name = names[data]
        for size in sorted({r.n for r, _ in ps}):
            rest = [p for p in ps if p[0].n != size]
            v = fit_grid(name, grids[data], rest, specs) if fit else shipped[data]
            for r, one in (p for p in ps if p[0].n == size):
                pred = scaling(r, one, specs, **{name: v})
                e = pred / r.throughput - 1
                kind = link_kind(r, specs)
                errors.setdefault(("size", r.framework, kind), []).append(e)
                lines.append(
                    f"| {data} | {r.platform} {r.gpu} | {r.model} | {r.batch} | {r.n} | "
                    f"{r.throughput:.0f} | {pred:.0f} | {e:+.1%} | {name}={v:g} |"
                )
        fitted_all[name] = fit_grid(name, grids[data], ps, specs) if fit else shipped[data]
    models = sorted({r.model for r, _ in by_data["tf2017"]})
    lines += [
        "",
        "### Leave one model out (TensorFlow rows; Lambda's built model is ResNet-50 only)",
        "",
        "| model | rows | SERIAL_REPLICA_SHARE fitted on the others | median abs error | worst |",
        "|---|---|---|---|---|",
    ]
    for model in models:
        rest = [p for p in by_data["tf2017"] if p[0].model != model]
        v = fit_grid("SERIAL_REPLICA_SHARE", SERIAL_GRID, rest, specs) if fit else shipped["tf2017"]
        errs = []
        for r, one in (p for p in by_data["tf2017"] if p[0].model == model):
            e = scaling(r, one, specs, SERIAL_REPLICA_SHARE=v) / r.throughput - 1
            errs.append(e)
            errors.setdefault(("model", r.framework, link_kind(r, specs)), []).append(e)
        a = [abs(e) for e in errs]
        lines.append(
            f"| {model} | {len(errs)} | {v:g} | {statistics.median(a):.1%} | {max(a):.1%} |"
        )
    lines += [
        "",
        "Per framework and link kind (median |error| of the n-GPU throughput; goal <= 10 %):",
        "",
        "| held out | framework | link | median abs error | rows |",
        "|---|---|---|---|---|",
    ]
    for (how, fw, kind), errs in sorted(errors.items()):
        a = [abs(e) for e in errs]
        lines.append(f"| {how} | {fw} | {kind} | {statistics.median(a):.1%} | {len(a)} |")
    lines += [
        "",
        ("Fitted on all rows: " if fit else "Constants used: ")
        + ", ".join(f"{k} = {v:g}" for k, v in fitted_all.items()),
        "",
    ]
    return {"errors": errors, "fitted": fitted_all}


def fastest_section(
    rows: list[Row], specs: Specs, fitted: dict[str, float], lines: list[str]
) -> None:
    """Which machine size is fastest per machine, model and batch: measured and predicted."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.data, r.platform, r.gpu, r.model, r.batch), []).append(r)
    right = total = 0
    lines += [
        "### Fastest machine size per machine, model and batch",
        "",
        "| data | machine | model | batch/GPU | measured fastest | predicted fastest |",
        "|---|---|---|---|---|---|",
    ]
    for key, rs in sorted(groups.items()):
        ns = {r.n: r for r in rs}
        if 1 not in ns or len(ns) < 2:
            continue
        meas = max(rs, key=lambda r: r.throughput).n
        pred_thr = {n: scaling(r, ns[1], specs, **fitted) if n > 1 else ns[1].throughput
                    for n, r in ns.items()}  # fmt: skip
        pred = max(pred_thr, key=lambda n: pred_thr[n])
        right += meas == pred
        total += 1
        lines.append(f"| {key[0]} | {key[1]} {key[2]} | {key[3]} | {key[4]} | {meas} | {pred} |")
    lines += ["", f"Right in {right} of {total} cases.", ""]


def small_section(specs: Specs, fitted: dict[str, float], lines: list[str]) -> None:
    """fcn and simple-cnn on 1-8 V100 (NVLink) and K80 (PCIe), torch and keras: predicted
    step per size and the term that grows."""
    lines += [
        "### Small models: where adding GPUs stops paying (predicted, no published rows)",
        "",
        "Global batch 256; images/s of the whole machine at 1/2/4/8 GPUs, and the "
        "terms of the 8-GPU step (ms).",
        "",
        "| model | GPU | framework | 1 | 2 | 4 | 8 | fastest | 8-GPU device / dispatch / "
        "input / all-reduce / replica |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for model in ("fcn", "simple-cnn"):
        for gpu, platform in (("V100", "lambda"), ("K80", "aws")):
            for data, fw in (("lambda", "torch"), ("tf2017", "keras")):
                thr = {}
                parts: dict[str, float] = {}
                for n in (1, 2, 4, 8):
                    r = Row(data, platform, gpu, n, model, 256 // n, 0.0)
                    with constants(**fitted):
                        parts = step_time(r, specs, n)
                    thr[n] = 256 / parts["t2"]
                best = max(thr, key=lambda n: thr[n])
                terms = " / ".join(
                    f"{parts[k] * 1e3:.2f}"
                    for k in ("device", "dispatch", "input", "allreduce", "replica")
                )
                lines.append(
                    f"| {model} | {gpu} | {fw} | "
                    + " | ".join(f"{thr[n]:.0f}" for n in (1, 2, 4, 8))
                    + f" | {best} | {terms} |"
                )
    lines.append("")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--no-fit", action="store_true", help="shipped constants only")
    parser.add_argument("--label", default="", help="the docs section's suffix (--no-fit)")
    args = parser.parse_args(argv)
    started = time.time()
    specs = Specs(HERE / "gpu-throughput")
    rows = lambda_rows() + tf_rows()
    fit = not args.no_fit
    lines: list[str] = [
        f"Rows: {sum(r.data == 'lambda' for r in rows)} Lambda (PyTorch DDP), "
        f"{sum(r.data == 'tf2017' for r in rows)} TensorFlow 2017 (one process, "
        "every replica), of the models built here.",
        "",
    ]
    from generation_profile import generation_section

    profiles = generation_section(rows, specs, fit, lines)
    with constants(**profiles):
        result = scaling_section(rows, specs, fit, lines)
        fitted = {**result["fitted"], **profiles}
        fastest_section(rows, specs, fitted, lines)
        small_section(specs, fitted, lines)
    flag = " --no-fit" if args.no_fit else ""
    lines.append(
        f"Command: `python benchmarks/multi_gpu.py{flag} --write-docs` "
        f"({time.time() - started:.0f} s)."
    )
    suffix = f" -- {args.label or 'shipped constants'}" if args.no_fit else ""
    publish(SECTION + suffix, "\n".join(lines), args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
