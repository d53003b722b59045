"""Kepler and Pascal whole-model profiles on TensorFlow's 2017 1-GPU rows (issue #47).

A generation's device time is the roofline of the traced step (``timing.device.
roofline_seconds``): FLOPs at ``efficiency`` x ``sustained_clock`` x the spec's fp32 peak plus
bytes at ``memory_efficiency`` x the spec's bandwidth; the host terms (dispatch, input) are
the product's. The two shares are fitted (least squares in log throughput) on one
generation's rows; ``sustained_clock`` is a prior (K80: its base clock, 560 of 875 MHz: two
dies share one 300 W board; P100: 1). Reported: leave one model out within a generation,
and leave one generation out (the other generation's shares with this one's spec sheet), with
the ratio of ResNet-50's throughput to a V100's. Run by ``benchmarks/multi_gpu.py``.
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np
from multi_gpu_data import Row, constants, machine_of, step, step_time

from advisor.prediction.timing import constants as C

GENS = {"kepler": "K80", "pascal": "P100"}
CLOCK = {"kepler": 560.0 / 875.0, "pascal": 1.0}  # sustained share of the boost peak (prior)
EFF_GRID = np.geomspace(0.1, 3.0, 120)
MEM_GRID = np.geomspace(0.03, 1.0, 100)


def parts_of(row: Row, specs: Any) -> dict[str, float]:
    """What the roofline needs of a 1-GPU row: FLOPs, bytes, peak, bandwidth, host terms."""
    ops = step(row.model, row.batch).trace.operators
    _, spec = machine_of(row, specs)
    with constants(**{f"profile_{g}": (1.0, 1.0, 1.0) for g in GENS}):
        host = step_time(row, specs, 1)
    return {
        "flops": sum(o.flops * o.count for o in ops),
        "bytes": sum(o.bytes * o.count for o in ops),
        "peak": spec.fp32_tflops * 1e12,
        "bandwidth": spec.memory_bandwidth_gbs * 1e9,
        "dispatch": host["dispatch"],
        "input": host["input"],
    }


def throughput(row: Row, p: dict[str, float], eff: float, mem: float, clock: float) -> float:
    """Images/s of ``row`` under the profile (the product's formula, vectorised over grids)."""
    device = p["flops"] / (eff * clock * p["peak"]) + p["bytes"] / (mem * p["bandwidth"])
    return row.batch / (np.maximum(p["dispatch"], device) + p["input"])


def fit(rows: list[Row], parts: dict[Row, dict[str, float]], clock: float) -> tuple[float, float]:
    """(efficiency, memory_efficiency) minimising the squared log error of ``rows``."""
    e, m = np.meshgrid(EFF_GRID, MEM_GRID, indexing="ij")
    loss = sum(np.log(throughput(r, parts[r], e, m, clock) / r.throughput) ** 2 for r in rows)
    i, j = np.unravel_index(int(np.argmin(loss)), e.shape)
    return float(EFF_GRID[i]), float(MEM_GRID[j])


def errors(rows: list[Row], parts: dict, eff: float, mem: float, clock: float) -> list[float]:
    return [float(throughput(r, parts[r], eff, mem, clock)) / r.throughput - 1 for r in rows]


def med(errs: list[float]) -> str:
    return f"{statistics.median(abs(x) for x in errs):.1%}"


def generation_section(rows: list[Row], specs: Any, fit_it: bool, lines: list[str]) -> dict:
    """The table of profiles and errors; returns the ``constants`` keys of the profiles used."""
    singles = [r for r in rows if r.data == "tf2017" and r.n == 1]
    parts = {r: parts_of(r, specs) for r in singles}
    own = {g: [r for r in singles if r.gpu == gpu] for g, gpu in GENS.items()}
    shipped = {g: C.GENERATIONS[g] for g in GENS}
    fitted = {g: fit(own[g], parts, CLOCK[g]) for g in GENS}
    used = {g: (fitted[g] if fit_it or not shipped[g].whole_model else
                (shipped[g].efficiency, shipped[g].memory_efficiency)) for g in GENS}  # fmt: skip
    lines += [
        "### Kepler and Pascal: whole-model profiles on TensorFlow's 1-GPU rows",
        "",
        "Device time = FLOPs / (efficiency x sustained clock x fp32 peak) + bytes / (memory "
        "efficiency x bandwidth), over the traced step (host terms the product's). Sustained "
        "clock a prior (K80 560/875 MHz, P100 1); the two shares fitted on the generation's "
        "rows. Kernel model: the device time as the kernel model gives it (spec extrapolation "
        "on the K80, measured P100 kernels), the model before the profile.",
        "",
        "| generation | rows | efficiency / memory efficiency (fitted on all its rows) | "
        "in-sample | leave one model out | leave one generation out (other's shares) | "
        "other's shares, K80 at boost clock | kernel model |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for g, gpu in GENS.items():
        other = next(o for o in GENS if o != g)
        eff, mem = fitted[g]
        lomo: list[float] = []
        for model in sorted({r.model for r in own[g]}):
            rest = [r for r in own[g] if r.model != model]
            e2, m2 = fit(rest, parts, CLOCK[g])
            held = errors([r for r in own[g] if r.model == model], parts, e2, m2, CLOCK[g])
            lomo += held
            notes.append(f"{gpu} {model} held out: shares {e2:.3g} / {m2:.3g}, {med(held)}")
        oe, om = fitted[other]
        logo = errors(own[g], parts, oe, om, CLOCK[g])
        # The K80 at its boost clock (sustained clock 1), the other generation's shares
        # refitted at that clock where the K80 is the one fitted on.
        boost = {"kepler": 1.0, "pascal": CLOCK["pascal"]}
        be, bm = fit(own[other], parts, boost[other])
        logo_boost = errors(own[g], parts, be, bm, boost[g])
        with constants(**{f"profile_{g}": None}):
            plain = [r.batch / step_time(r, specs, 1)["t2"] / r.throughput - 1 for r in own[g]]
        lines.append(
            f"| {g} ({gpu}) | {len(own[g])} | {eff:.3g} / {mem:.3g} | "
            f"{med(errors(own[g], parts, eff, mem, CLOCK[g]))} | {med(lomo)} | {med(logo)} | "
            f"{med(logo_boost)} | {med(plain)} |"
        )
    lines += ["", "Leave one model out, per model: " + "; ".join(notes) + ".", "",
              "Per row (the fitted profile, in-sample):", "",
              "| GPU | model | batch | measured | predicted | error |", "|---|---|---|---|---|---|"]  # fmt: skip
    for g in GENS:
        for r in own[g]:
            pred = float(throughput(r, parts[r], *fitted[g], CLOCK[g]))
            e = pred / r.throughput - 1
            lines.append(f"| {r.platform} {r.gpu} | {r.model} | {r.batch} | "
                         f"{r.throughput:.0f} | {pred:.0f} | {e:+.1%} |")  # fmt: skip
    v100 = Row("lambda", "lambda", "V100", 1, "resnet50", 64, 0.0)
    t_v100 = step_time(v100, specs, 1)["t2"]  # the V100's kernels measured
    lines += [
        "",
        "Ratio of ResNet-50 throughput to a V100 at batch 64 per GPU (published V100: Lambda's "
        "PyTorch 369 images/s; the K80/P100 figures are TensorFlow 2017's, so the published "
        "ratio mixes two frameworks). Shipped: the K80's profile, the P100's measured kernels.",
        "",
        "| GPU | published ratio | predicted, shipped | own profile | other generation's "
        "shares (leave one generation out) |",
        "|---|---|---|---|---|",
    ]
    for g, gpu in GENS.items():
        r = next(r for r in own[g] if r.model == "resnet50" and r.batch == 64)
        other = next(o for o in GENS if o != g)
        t_ship = r.batch / step_time(r, specs, 1)["t2"]
        t_own = float(throughput(r, parts[r], *fitted[g], CLOCK[g]))
        t_other = float(throughput(r, parts[r], *fitted[other], CLOCK[g]))
        lines.append(
            f"| {gpu} | {r.throughput / 369:.3f} | {t_ship * t_v100 / 64:.3f} | "
            f"{t_own * t_v100 / 64:.3f} | {t_other * t_v100 / 64:.3f} |"
        )
    lines.append("")
    out: dict[str, Any] = {}
    for g in GENS:
        if fit_it or shipped[g].whole_model:
            out[f"profile_{g}"] = (*used[g], CLOCK[g])
    return out if fit_it else {}
