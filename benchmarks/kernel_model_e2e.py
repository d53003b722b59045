"""Whole models of ``models-e2e.csv`` predicted from their operator traces (issue #26).

Each one-GPU row whose model is built in ``examples/transformers.py`` (GPT-2 Large, GPT-3 XL
and 2.7B, OPT-1.3B, BERT-Large; not the Switch transformer) is traced on the meta device with
the project's tracer (``advisor.probes.operators.trace_step``) and summed per operator with
the kernel model on the row's GPU:

- ``mode=train`` rows (the artefact times the forward pass and ``loss.backward()``, no
  optimizer step): the trace's forward and backward phases;
- ``mode=inf`` rows (the forward pass under ``no_grad`` in eval mode): the forward phase
  without dropout kernels; BERT's inference model there is a sequence classifier, so its
  masked-LM head is left out (traced without it).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.probes.operators.types import Operator, OperatorTrace

from advisor.prediction.kernels import operator_times
from advisor.prediction.kernels.gpus import DATA_DEVICE_NAMES, GpuSpec, gpu_spec

MODELS = {  # models-e2e.csv name -> examples/model_configs name
    "gpt2_large": "gpt2_large",
    "gpt3_xl": "gpt3_xl",
    "gpt3_27": "gpt3_27",
    "opt_13": "opt_13",
    "bert_large": "bert_large",
}
DROPOUT_OPS = ("dropout",)


@dataclass(frozen=True)
class E2ERow:
    """One measured whole-model row and the published predictors' figures (ms)."""

    model: str
    seqlen: int
    batch: int
    device: str  # the file's device name (underscores)
    gpu: str  # catalog name
    mode: str
    measured_ms: float
    forward_ms: float
    backward_ms: float
    neusight_ms: float | None
    roofline_ms: float | None


def _float(v: str) -> float | None:
    return float(v) if v.strip() else None


def read_rows(path: Path) -> list[E2ERow]:
    """The one-GPU rows on GPUs with spec records, whose model is built here."""
    names = {k.replace(" ", "_"): v for k, v in DATA_DEVICE_NAMES.items()}
    out = []
    with path.open() as fh:
        for r in csv.DictReader(fh):
            if r["option"].strip() or r["device"] not in names or r["model_name"] not in MODELS:
                continue
            out.append(
                E2ERow(
                    r["model_name"], int(r["seqlen"]), int(r["batch"]), r["device"],
                    names[r["device"]], r["mode"], float(r["label_all_e2e_latency"]),
                    float(r["label_all_fw_latency"]), float(r["label_all_bwall_latency"]),
                    _float(r["neusight_all_e2e_latency"]), _float(r["roofline_all_e2e_latency"]),
                )
            )  # fmt: skip
    return out


def _trace(model_name: str, batch: int, seqlen: int, inference: bool) -> OperatorTrace:
    import torch
    from advisor.probes.operators.torch_trace import trace_step

    from examples.transformer_blocks import Bert, Gpt2, Opt
    from examples.transformers import TokenLoss, load_config

    config = load_config(MODELS[model_name])
    network = {"gpt2": Gpt2, "bert": Bert, "opt": Opt}[config["model_type"]]
    with torch.device("meta"):
        model = network(config)
        loss_fn: Any = TokenLoss()
        if inference and config["model_type"] == "bert":  # a classifier there: no MLM head
            model.transform, model.decoder = torch.nn.Identity(), torch.nn.Identity()

            def loss_fn(out: Any, _: Any) -> Any:
                return out[:, 0].sum()

        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        ids = torch.zeros((batch, seqlen), dtype=torch.long)
    return trace_step(model, loss_fn, optimizer, ids, ids, workload=model_name, batch_size=batch)


def step_operators(row: E2ERow, cache: Path | None = None) -> list[Operator]:
    """The operators of what ``row`` timed (see the module docstring), cached as JSON."""
    inference = row.mode == "inf"
    key = f"{row.model}-{row.batch}-{row.seqlen}-{'inf' if inference else 'train'}"
    path = cache / f"{key}.json" if cache else None
    if path is not None and path.exists():
        trace = OperatorTrace.from_dict(json.loads(path.read_text()))
    else:
        trace = _trace(row.model, row.batch, row.seqlen, inference)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(trace.to_dict()))
    if inference:
        return [o for o in trace.operators if o.phase == "forward" and o.op not in DROPOUT_OPS]
    return [o for o in trace.operators if o.phase in ("forward", "backward")]


@dataclass(frozen=True)
class E2EPrediction:
    row: E2ERow
    predicted_ms: float
    low_ms: float
    high_ms: float
    forward_ms: float
    basis: str  # measured, chip (its chip measured on another board) or spec

    @property
    def error(self) -> float:
        return self.predicted_ms / self.row.measured_ms - 1


def predict_rows(rows: list[E2ERow], cache: Path | None = None) -> list[E2EPrediction]:
    """The kernel model's step time of every row (its ops summed on its GPU)."""
    out = []
    specs: dict[str, GpuSpec] = {}
    for row in rows:
        ops = step_operators(row, cache)
        spec = specs.setdefault(row.gpu, gpu_spec(row.gpu))
        times = operator_times(ops, [spec])
        counts = [o.count for o in ops]
        total = sum(c * v for c, v in zip(counts, times.value[:, 0], strict=True))
        low = sum(c * v for c, v in zip(counts, times.low[:, 0], strict=True))
        high = sum(c * v for c, v in zip(counts, times.high[:, 0], strict=True))
        fwd = sum(
            c * v
            for c, v, o in zip(counts, times.value[:, 0], ops, strict=True)
            if o.phase == "forward"
        )
        how = "measured" if times.measured[:, 0].any() else "spec"
        how = "chip" if how == "spec" and times.same_chip[:, 0].any() else how
        out.append(E2EPrediction(row, total * 1e3, low * 1e3, high * 1e3, fwd * 1e3, how))
    return out
