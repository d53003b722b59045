"""The per-operator GPU kernel model against data its fit never saw (issue #26).

Per operator kind: leave one GPU out on ``train/``, the ``test/`` shapes of the measured GPUs,
the ``test/`` rows of the GPUs never fitted (H100, L4, A100 80GB), three candidate designs
compared; whole models of ``models-e2e.csv`` beside NeuSight's and the roofline's published
figures; the ResNet-50 throughput check; the fastest/cheapest decision; the 80 % interval's
coverage; the speed of ``predict_trace``. Data: ``benchmarks/data/`` (see the READMEs there).

    python benchmarks/kernel_model.py [--write-docs] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # examples/ (the transformer builders)

import kernel_model_decision as decision  # noqa: E402
import kernel_model_e2e as e2e  # noqa: E402
import kernel_model_kernels as kernels  # noqa: E402
import kernel_model_resnet as resnet  # noqa: E402
import kernel_model_speed as speed  # noqa: E402
from docs_section import publish  # noqa: E402

from advisor.prediction.kernels.model import PARAMS  # noqa: E402

DATA = HERE / "data" / "gpu-kernels"
SECTION = "## GPU kernel model: per operator and whole models on unseen GPUs (issue #26)"
UNSEEN = ("H100", "L4", "A100-80GB-PCIe")
# Today's roofline model on the same ResNet-50 rows, leave one GPU out with its efficiencies
# fitted to these rows (docs/benchmarks.md, "Cross-GPU validation on published throughputs",
# python benchmarks/cross_gpu.py --write-docs).
TODAY_RESNET = "median |error| 9.3 %, worst 17.7 % (13 rows)"


def pct(x: float) -> str:
    return f"{x:.1%}"


def kind_table(title: str, held: kernels.Held) -> list[str]:
    rows = kernels.summary(held)
    gpus = [*sorted({g for _, g, *_ in rows if g != "all"}), "all"]
    lines = [f"**{title}** (median / 90th percentile |error|, rows)", "",
             "| kind | " + " | ".join(gpus) + " |", "|---" * (len(gpus) + 1) + "|"]  # fmt: skip
    for kind in sorted({k for k, *_ in rows}):
        cells = {g: f"{pct(m)} / {pct(q)} ({n})" for k, g, n, m, q, _ in rows if k == kind}
        lines.append(f"| {kind} | " + " | ".join(cells.get(g, "-") for g in gpus) + " |")
    return [*lines, ""]


def coverage_line(name: str, held: kernels.Held) -> str:
    inside = (held.low <= held.measured) & (held.measured <= held.high)
    return f"- {name}: {pct(float(inside.mean()))} of {len(inside)} rows"


def designs_section(p: float, params: dict) -> tuple[list[str], kernels.Held]:
    results = {}
    for name, design in (("roofline, one efficiency per family", kernels.Designs.roofline),
                         ("ridge on the features (quadratic)", kernels.Designs.ridge),
                         ("gradient-boosted trees (shipped)", kernels.Designs.trees)):  # fmt: skip
        results[name] = kernels.leave_one_gpu_out(DATA, design, p, params)
    gpus = sorted(set(next(iter(results.values())).gpu.tolist()))
    lines = ["### Three designs, leave one GPU out on train/ (median |error| per GPU, all kinds)",
             "", "| design | " + " | ".join(gpus) + " | all |", "|---" * (len(gpus) + 2) + "|"]  # fmt: skip
    for name, held in results.items():
        err = held.error()
        cells = [pct(float(np.median(err[held.gpu == g]))) for g in gpus]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {pct(float(np.median(err)))} |")
    return [*lines, ""], results["gradient-boosted trees (shipped)"]


def e2e_section(preds: list[e2e.E2EPrediction]) -> list[str]:
    lines = ["### Whole models (models-e2e.csv, one GPU), predicted step vs measured", "",
             "| model | batch | mode | GPU | basis | measured ms | ours ms [80 %] | ours | NeuSight | roofline |",
             "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for q in sorted(preds, key=lambda q: (q.row.gpu, q.row.model, q.row.batch, q.row.mode)):
        r = q.row
        ns = f"{r.neusight_ms / r.measured_ms - 1:+.1%}" if r.neusight_ms else "-"
        rf = f"{r.roofline_ms / r.measured_ms - 1:+.1%}" if r.roofline_ms else "-"
        lines.append(
            f"| {r.model} | {r.batch} | {r.mode} | {r.gpu} | {q.basis} | {r.measured_ms:.0f} | "
            f"{q.predicted_ms:.0f} [{q.low_ms:.0f}, {q.high_ms:.0f}] | {q.error:+.1%} | {ns} | {rf} |"
        )
    lines += ["", "| GPU | rows | ours median / worst | NeuSight median | roofline median | 80 % covers |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    groups = [(g, [q for q in preds if q.row.gpu == g]) for g in sorted({q.row.gpu for q in preds})]
    groups.append(("unseen: " + ", ".join(UNSEEN), [q for q in preds if q.row.gpu in UNSEEN]))
    for g, qs in groups:
        ours = [abs(q.error) for q in qs]
        nse = [abs(q.row.neusight_ms / q.row.measured_ms - 1) for q in qs if q.row.neusight_ms]
        rfe = [abs(q.row.roofline_ms / q.row.measured_ms - 1) for q in qs if q.row.roofline_ms]
        cover = sum(q.low_ms <= q.row.measured_ms <= q.high_ms for q in qs)
        lines.append(
            f"| {g} | {len(qs)} | {pct(statistics.median(ours))} / {pct(max(ours))} | "
            f"{pct(statistics.median(nse))} | {pct(statistics.median(rfe))} | {cover}/{len(qs)} |"
        )
    return [*lines, ""]


def resnet_section(rows: list[resnet.ResnetRow]) -> list[str]:
    lines = ["### ResNet-50 training throughput (Lambda, fp32/TF32, 1 GPU)", "",
             "| GPU (row) | basis | batch | measured img/s | predicted [80 %] | error |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(f"| {r.name} | {r.basis} | {r.batch} | {r.measured:.0f} | "
                     f"{r.predicted:.0f} [{r.low:.0f}, {r.high:.0f}] | {r.error:+.1%} |")  # fmt: skip
    inside = sum(r.low <= r.measured <= r.high for r in rows)
    return [*lines, "", f"Kernel model (fitted on no ResNet row): {resnet.summary(rows)}; the 80 % "
            f"interval covers {inside}/{len(rows)}. Today's model on the same rows (its "
            f"efficiencies fitted to them, leave one GPU out): {TODAY_RESNET}.", ""]  # fmt: skip


def decision_section(preds: list[e2e.E2EPrediction], rows: list[resnet.ResnetRow]) -> list[str]:
    prices = decision.one_gpu_prices()
    priced = sorted({q.row.gpu for q in preds} | {r.gpu for r in rows})
    used = [f"{g}: {p[1]} ${p[0]:.2f}/h" for g in priced if (p := decision.price_of(g, prices))]
    lines = ["### The decision: fastest and cheapest GPU", "",
             "| predictor | groups | fastest right | cheapest right (priced groups) | "
             "cost pairs ordered right | regret (sum) | median regret share |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    figures = (("kernel model", lambda q: q.predicted_ms), ("NeuSight", lambda q: q.row.neusight_ms),
               ("roofline", lambda q: q.row.roofline_ms))  # fmt: skip
    for name, fig in figures:
        s = decision.score(decision.e2e_choices(preds, fig), prices, 1000, "per 1,000 steps")
        lines.append(f"| models-e2e, {name} | {s.groups} | {s.fastest_right} | {s.cheapest_right}"
                     f" ({s.cheapest_groups}) | {s.cost_pairs_right}/{s.cost_pairs} | "
                     f"${s.regret_usd:.3f} {s.unit} | {pct(s.regret_share)} |")  # fmt: skip
    s = decision.score(decision.resnet_choice(rows), prices, 1e6, "per million images")
    lines.append(f"| ResNet-50 (Lambda), kernel model | {s.groups} | {s.fastest_right} | "
                 f"{s.cheapest_right} ({s.cheapest_groups}) | {s.cost_pairs_right}/{s.cost_pairs} | "
                 f"${s.regret_usd:.2f} {s.unit} | {pct(s.regret_share)} |")  # fmt: skip
    return [*lines, "", "Prices (catalog 2026-11, cheapest on-demand one-GPU machine; "
            "measured boards not sold take " + ", ".join(f"{a} -> {b}" for a, b in
            decision.PRICE_AS.items()) + "; P4 and the workstation boards are not priced): "
            + "; ".join(used) + ".", ""]  # fmt: skip


def reading(preds: list[e2e.E2EPrediction]) -> list[str]:
    """The whole-model goal against these numbers, in words."""
    unseen = [q for q in preds if q.row.gpu in UNSEEN]
    ours = statistics.median(abs(q.error) for q in unseen)
    ns = statistics.median(abs(q.row.neusight_ms / q.row.measured_ms - 1) for q in unseen)
    worst = max(unseen, key=lambda q: abs(q.error))
    return [
        "### Reading these numbers", "",
        f"Goal: median whole-model error on the GPUs not fitted below NeuSight's on the same "
        f"rows, at most 10 %, below the roofline's on every GPU. Here: {pct(ours)} against "
        f"NeuSight's {pct(ns)} ({len(unseen)} rows), below the roofline on every GPU; not below "
        f"NeuSight. Where the distance comes from: (1) the H100's and the A100 80 GB's float32 "
        "products run at 0.74 and 0.89 of peak where the fitted boards reach 0.80 or less; "
        "nothing in a spec sheet but board power separates them, and five measured boards do "
        "not pin down a power term (tried: a power cap from board power and process node moved "
        "the leave-one-GPU-out errors by -7 to +4 points per GPU, no consistent gain), so mid-sized H100 products are predicted 10-20 % slow; (2) the L4, a "
        "72 W board at ~0.29 of its peak, whose GPT-3-shaped products the trees place in the "
        f"T4/P4 region and predict too slow (worst row: {worst.row.model} b{worst.row.batch} "
        f"{worst.row.mode} on {worst.row.gpu}, {worst.error:+.0%}). NeuSight's figures come "
        "from its own fit, which also used the tables' kernel names (tile sizes) that this "
        "model does without. The kernel tables' `train/` sweep ran slower than the whole "
        "models (clock state), so the fit also uses the measured GPUs' `test/` shapes; the "
        "per-kernel `test/` table above is cross-fitted (each GPU's `test/` rows predicted by a "
        "fit without them).", "",
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--cache", type=Path, help="folder for the traced whole models")
    args = parser.parse_args(argv)
    started = time.time()
    params = json.loads(PARAMS.read_text())
    p = kernels.choose_p(DATA, params)
    lines = [f"Kernel model: {params['source']}; harness exponent p = {p:g} (chosen on the "
             "fitted rows). Errors are |predicted / measured - 1| of the harness time.", ""]  # fmt: skip
    design_lines, logo = designs_section(p, params)
    test = kernels.test_shapes(DATA, p, params)
    unseen = kernels.unseen(DATA, p, params)
    lines += [*design_lines, "### Per operator kind", ""]
    lines += kind_table("Leave one GPU out (train/ rows, spec-only prediction)", logo)
    lines += kind_table("test/ shapes on the measured GPUs", test)
    lines += kind_table("test/ rows of the GPUs never fitted", unseen)
    with tempfile.TemporaryDirectory() as tmp:
        preds = e2e.predict_rows(e2e.read_rows(DATA / "models-e2e.csv"), args.cache or Path(tmp))
    resnet_rows = resnet.predict()
    lines += e2e_section(preds) + resnet_section(resnet_rows)
    lines += ["### Interval coverage (80 % interval, held-out rows)", "",
              coverage_line("test/ shapes on the measured GPUs (calibrated on the other GPUs)", test),
              coverage_line("test/ rows of the GPUs never fitted", unseen),
              coverage_line("leave one GPU out (in sample for the spec-only interval)", logo),
              f"- whole models on the GPUs never fitted: "
              f"{sum(q.low_ms <= q.row.measured_ms <= q.high_ms for q in preds if q.row.gpu in UNSEEN)}"
              f" of {sum(q.row.gpu in UNSEEN for q in preds)} rows", ""]  # fmt: skip
    lines += decision_section(preds, resnet_rows)
    lines += reading(preds)
    t = speed.time_prediction()
    lines += ["### Speed", "", f"`predict_trace` of a {t['operators']}-operator trace on "
              f"{t['machines']} catalog machines ({t['gpus']} distinct GPUs): {t['warm_s']:.3f} s "
              f"(median of 7, worst {t['warm_max_s']:.3f} s; cold first call {t['cold_s']:.3f} s).",
              "", f"Command: `python benchmarks/kernel_model.py {' '.join(sys.argv[1:])}` "
              f"({time.time() - started:.0f} s on this 2-core machine; `--cache DIR` keeps the "
              "traced models between runs).", ""]  # fmt: skip
    text = "\n".join(lines)
    publish(SECTION, text, args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
