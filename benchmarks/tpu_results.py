"""The TPU step on published TPU training results (issue #47).

Data: ``data/tpu-results/`` (the Flax authors' ResNet-50 ImageNet runs on TPU v3-8, v2-32,
v3-32 and 8 V100 GPUs; see its README). The workload is the repository's ResNet-50 traced on
the meta device at the per-chip batch. Each prediction is the product's own
``accel.predict_accelerator`` (a TPU: the roofline over the trace's FLOPs and bytes at the
generation's efficiency, one XLA program per step, the gradients all-reduced over the chips).

- The TPU profile's device scale (the roofline's time x this: the roofline sums the trace's
  FLOPs at 0.35 of the bf16 peak and its eager per-kernel bytes, which a fused bfloat16 XLA
  program does not move) is fitted on the v3-8 row only;
- held out: the v2-32 and v3-32 rows (another generation, another slice size) and the ratio of
  the v3-8 to 8 V100 GPUs (the V100s by the GPU kernel model, fitted on no row here).

    python benchmarks/tpu_results.py [--write-docs]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

from advisor.providers.catalog import InstanceType, load

from advisor.prediction.timing import accel
from advisor.prediction.timing import constants as C
from advisor.prediction.timing.startup import device_startup

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_section import publish  # the benchmarks beside it
from multi_gpu_data import signature, step

DATA = Path(__file__).resolve().parent / "data" / "tpu-results"
SECTION = "## TPUs on published training results (issue #47)"
GRID = [round(0.01 * i, 2) for i in range(5, 151)]


def rows() -> list[dict[str, Any]]:
    with (DATA / "rows.csv").open() as fh:
        return list(csv.DictReader(fh))


def throughput(row: dict[str, Any], scale: float | None = None) -> tuple[float, dict]:
    """The product's images/s for a row (a TPU at device ``scale`` when given)."""
    catalog = load()
    spec = catalog.accelerator(row["accelerator"])
    n, batch = int(row["chips"]), int(row["global_batch"])
    per = math.ceil(batch / n)
    s = step("resnet50", per)
    tpu = row["accelerator"].startswith("TPU")
    sig = signature(s, "resnet50", "keras" if tpu else "torch")
    provider = "gcp" if tpu else "owned"
    m = InstanceType(provider, "compute-engine", row["run"], 96, 340.0, spec.name, n, 1.0,
                     1.0, None, "", "benchmark")  # fmt: skip
    gens = dict(C.GENERATIONS)
    if scale is not None:
        gens["tpu"] = dataclasses.replace(gens["tpu"], device_scale=scale)
    with mock.patch.object(C, "GENERATIONS", gens):
        profile = accel.generation_profile(spec)
        startup = device_startup(spec.name, profile, records=[])
        _, parts, _, _, _ = accel.predict_accelerator(sig, m, spec, per * n, s, startup)
    t2 = accel.iteration_time(parts)
    return per * n / t2, parts


def fit(row: dict[str, Any]) -> float:
    """The TPU device scale minimising |log error| on ``row``."""
    measured = float(row["images_per_s"])
    return min(GRID, key=lambda e: abs(math.log(throughput(row, e)[0] / measured)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    started = time.time()
    data = {r["run"]: r for r in rows()}
    eff = fit(data["TPU v3-8"])
    shipped = C.GENERATIONS["tpu"].device_scale
    lines = [
        f"TPU device scale fitted on the v3-8 row: {eff:g} (shipped: {shipped:g}).",
        "",
        "| run | chips | batch | measured images/s | predicted (fitted) | error | predicted "
        "(shipped) | error | limit (fitted) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    predicted: dict[str, float] = {}
    for name, r in data.items():
        tpu = r["accelerator"].startswith("TPU")
        got, parts = throughput(r, eff if tpu else None)
        ship, _ = throughput(r)
        meas = float(r["images_per_s"])
        predicted[name] = got
        role = "fitted" if name == "TPU v3-8" else "held out"
        lines.append(
            f"| {name} ({role}) | {r['chips']} | {r['global_batch']} | {meas:.0f} | {got:.0f} | "
            f"{got / meas - 1:+.1%} | {ship:.0f} | {ship / meas - 1:+.1%} | "
            f"{accel.bottleneck(parts)} |"
        )
    ratio_m = float(data["TPU v3-8"]["images_per_s"]) / float(data["v100_x8"]["images_per_s"])
    ratio_p = predicted["TPU v3-8"] / predicted["v100_x8"]
    lines += [
        "",
        f"TPU v3-8 against 8 V100 GPUs (the same program): measured {ratio_m:.2f}x, predicted "
        f"{ratio_p:.2f}x (the V100s by the kernel model in float32, the TPU in bfloat16).",
        "",
        "Reading these numbers: one fitted row cannot say how the efficiency varies by model; "
        "the held-out -32 rows run 64 images per chip on four hosts (the model's one host "
        "feeds every chip), so their errors include what a slice of several hosts adds.",
        "",
        f"Command: `python benchmarks/tpu_results.py --write-docs` ({time.time() - started:.0f} s).",
    ]
    publish(SECTION, "\n".join(lines), args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
