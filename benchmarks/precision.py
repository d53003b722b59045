"""Mixed precision against Lambda's published fp16 and fp32 training throughputs (issue #35).

For every model of ``benchmarks/data/gpu-throughput`` that this repository can build --
ResNet-50 (224x224, 1000 classes, SGD momentum), BERT base and large fine-tuned on SQuAD
(sequence 384, a start/end head, AdamW) -- and every 1-GPU row measured in both tables:
the step is traced on the meta device at the row's per-GPU batch (the fp32 batch file; the
fp16 batch file is not published with the data), rewritten under the plan
(``advisor.prediction.step.rewrite``) and timed by the GPU kernel model, with the host's launch
floor (``max(device, launches x dispatch prior)``, as ``timing.accel``). The fp32 column is run
as NVIDIA's NGC containers run it (TF32 matrix products and convolutions where the GPU has
TF32); the fp16 column as AMP (autocast float16 with loss scaling). Predicted throughput =
batch / step. Nothing is fitted to these tables: the kernel model's fit never saw them, and
the plan's rules are autocast's lists. Transformer-XL, GNMT, NCF, SSD, Tacotron 2 and
WaveGlow have no builder here and are left out. Lambda's table has no T4 row.

    python benchmarks/precision.py [--write-docs]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # examples/ (the transformer builders)

from docs_section import write_section  # noqa: E402
from kernel_model_resnet import extra_gpus, resnet50_trace  # noqa: E402
from lambda_rows import gpu_of  # noqa: E402

from advisor.prediction.kernels import gpu_spec, predict_trace  # noqa: E402
from advisor.prediction.step.plan import TrainingPlan  # noqa: E402
from advisor.prediction.step.rewrite import plan_trace  # noqa: E402
from advisor.prediction.timing import constants as C  # noqa: E402

DATA = HERE / "data" / "gpu-throughput"
SECTION = "## Mixed precision against Lambda's fp16 and fp32 throughputs (issue #35)"
MODELS = ("resnet50", "bert_base_squad", "bert_large_squad")
SQUAD_SEQ = 384
ALIASES = {"A100 40GB PCIe": "A100-40GB-PCIe"}
RANKED = ("V100", "A10", "A100", "H100")  # cloud GPUs of the table (it has no T4)
# A GPU the batch file has no row for runs the batch of the listed board of the same memory
# size (the runs fill the memory): the A10 (24 GB) as the RTX 3090 (24 GB).
SAME_MEMORY_BATCH = {"A10": "RTX 3090"}


@dataclass(frozen=True)
class Row:
    model: str
    name: str
    gpu: str
    batch: int
    measured16: float
    measured32: float
    predicted16: float
    predicted32: float
    fp32_as: str

    @property
    def error16(self) -> float:
        return self.predicted16 / self.measured16 - 1

    @property
    def error32(self) -> float:
        return self.predicted32 / self.measured32 - 1

    @property
    def speedup_measured(self) -> float:
        return self.measured16 / self.measured32

    @property
    def speedup_predicted(self) -> float:
        return self.predicted16 / self.predicted32

    @property
    def speedup_error(self) -> float:
        return self.speedup_predicted / self.speedup_measured - 1


def bert_squad_trace(config: str, batch: int) -> Any:
    """One SQuAD fine-tuning step of BERT (``config``: bert, bert_large) on meta: the
    encoder, a start/end head on every position, cross-entropy over positions, AdamW."""
    import torch
    from advisor.probes.operators.torch_trace import trace_step

    from examples.transformer_blocks import Bert
    from examples.transformers import load_config

    c = load_config(config)
    with torch.device("meta"):
        model = Bert(c)
        model.transform = torch.nn.Identity()
        model.decoder = torch.nn.Linear(c["hidden_size"], 2)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.01)
        ids = torch.zeros((batch, SQUAD_SEQ), dtype=torch.long)
        target = torch.zeros((batch, 2), dtype=torch.long)

    def loss(logits: Any, y: Any) -> Any:
        f = torch.nn.functional
        return f.cross_entropy(logits[..., 0], y[:, 0]) + f.cross_entropy(logits[..., 1], y[:, 1])

    return trace_step(model, loss, optimizer, ids, target, workload=f"{config}-squad",
                      batch_size=batch)  # fmt: skip


_TRACES: dict[tuple[str, int], Any] = {}


def trace_of(model: str, batch: int) -> Any:
    key = (model, batch)
    if key not in _TRACES:
        if model == "resnet50":
            _TRACES[key] = resnet50_trace(batch)
        else:
            _TRACES[key] = bert_squad_trace("bert" if "base" in model else "bert_large", batch)
    return _TRACES[key]


def step_s(trace: Any, spec: Any, precision: str) -> float:
    """Seconds of one step under ``precision``: the kernel model's device time of the plan's
    trace, or the host's launch floor when that is longer."""
    planned = plan_trace(trace, TrainingPlan(precision))
    device = predict_trace(planned, [spec], tf32_matmul=precision == "tf32")[spec.name]
    return max(device.total.value, planned.launches * C.DISPATCH_S_PER_LAUNCH)


def _table(name: str) -> dict[tuple[str, int], dict[str, str]]:
    with (DATA / name).open() as fh:
        return {(r["name_gpu"], int(float(r["num_gpu"]))): r for r in csv.DictReader(fh)}


def rows(models: tuple[str, ...] = MODELS) -> list[Row]:
    """Every 1-GPU row of ``models`` measured in both tables, predicted."""
    fp16, fp32 = _table("train-throughput-fp16.csv"), _table("train-throughput-fp32.csv")
    batches = {(gpu_of(k[0]), k[1]): r for k, r in _table("train-batch-fp32.csv").items()}
    extra = extra_gpus(DATA)
    out = []
    for (name, n), r16 in fp16.items():
        gpu = gpu_of(name)
        if n != 1 or gpu is None or (name, n) not in fp32:
            continue
        gpu = ALIASES.get(gpu, gpu)
        spec = extra[gpu] if gpu in extra else gpu_spec(gpu)
        for model in models:
            m16, m32 = float(r16[model]), float(fp32[(name, n)][model])
            b_row = batches.get((gpu_of(name), n)) or batches.get(
                (SAME_MEMORY_BATCH.get(gpu, ""), n)
            )
            if m16 <= 0 or m32 <= 0 or b_row is None or int(b_row[model]) <= 0:
                continue
            b = int(b_row[model])
            trace = trace_of(model, b)
            as32 = "tf32" if spec.tf32_tflops else "fp32"
            t16, t32 = step_s(trace, spec, "fp16"), step_s(trace, spec, as32)
            out.append(Row(model, name, gpu, b, m16, m32, b / t16, b / t32, as32))
    return out


def _order(values: dict[str, float]) -> list[str]:
    return sorted(values, key=lambda k: -values[k])


def summary(found: list[Row]) -> dict[str, Any]:
    e16 = [abs(r.error16) for r in found]
    e32 = [abs(r.error32) for r in found]
    es = [abs(r.speedup_error) for r in found]
    fastest = {}
    ranking = {}
    for model in sorted({r.model for r in found}):
        mine = [r for r in found if r.model == model]
        meas = max(mine, key=lambda r: r.measured16).name
        pred = max(mine, key=lambda r: r.predicted16).name
        fastest[model] = (meas, pred)
        cloud = {}
        for r in mine:
            short = next((g for g in RANKED if _cloud_gpu(r.gpu) == g), None)
            if short is not None and short not in cloud:
                cloud[short] = r
        ranking[model] = (
            _order({k: r.measured16 for k, r in cloud.items()}),
            _order({k: r.predicted16 for k, r in cloud.items()}),
        )
    return {
        "rows": len(found),
        "median_error16": statistics.median(e16),
        "worst_error16": max(e16),
        "median_error32": statistics.median(e32),
        "median_speedup_error": statistics.median(es),
        "within20_speedup": sum(e <= 0.20 for e in es),
        "fastest": fastest,
        "ranking": ranking,
    }


def _cloud_gpu(gpu: str) -> str:
    """The cloud family of a row's GPU (V100, A10, A100, H100) or ""."""
    g = gpu.upper()
    for short in ("A100", "H100", "V100", "A10"):
        if g.startswith(short):
            return short
    return ""


def render(found: list[Row], s: dict[str, Any]) -> str:
    lines = [
        "Command: `python benchmarks/precision.py --write-docs` (nothing fitted to these tables; "
        "data: `benchmarks/data/gpu-throughput`, Lambda's `deeplearning-benchmark`).",
        "",
        f"{s['rows']} one-GPU rows (ResNet-50 images/s, BERT SQuAD sequences/s). Goals: median "
        "|error| <= 15 % on fp16 throughput, the fp16/fp32 speed-up within 20 %, the measured "
        "fastest GPU predicted fastest.",
        "",
        f"- fp16 (AMP) throughput: median |error| {s['median_error16']:.1%}, worst "
        f"{s['worst_error16']:.1%}; fp32 (TF32 where the GPU has it) median |error| "
        f"{s['median_error32']:.1%}.",
        f"- fp16/fp32 speed-up: median |error| {s['median_speedup_error']:.1%}; "
        f"{s['within20_speedup']} of {s['rows']} rows within 20 %.",
    ]
    for model in sorted({r.model for r in found}):
        mine = [r for r in found if r.model == model]
        med = statistics.median
        lines.append(
            f"- {model}: fp16 median error {med(r.error16 for r in mine):+.1%}, fp32 "
            f"{med(r.error32 for r in mine):+.1%}, speed-up {med(r.speedup_error for r in mine):+.1%}"
            f" (signed medians, {len(mine)} rows)."
        )
    for model, (meas, pred) in s["fastest"].items():
        ok = "yes" if meas == pred else "no"
        lines.append(f"- {model}: fastest measured {meas}, predicted {pred} ({ok}).")
    for model, (meas, pred) in s["ranking"].items():
        lines.append(f"- {model} ranking (fp16) measured {' > '.join(meas)}, predicted "
                     f"{' > '.join(pred)}.")  # fmt: skip
    lines += [
        "",
        "| model | GPU | batch | fp16 measured | fp16 predicted | error | fp32 as | "
        "fp32 measured | fp32 predicted | speed-up measured | predicted |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in found:
        lines.append(
            f"| {r.model} | {r.name} | {r.batch} | {r.measured16:.0f} | {r.predicted16:.0f} | "
            f"{r.error16:+.0%} | {r.fp32_as} | {r.measured32:.0f} | {r.predicted32:.0f} | "
            f"{r.speedup_measured:.2f} | {r.speedup_predicted:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    found = rows()
    text = render(found, summary(found))
    print(text)
    if args.write_docs:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
