"""The published memory calculators' figures for fine-tuning cases, each tool's own code
(run by ``benchmarks/calculators.py`` in the calculators' environment; imports nothing of
advisor, so that each tool runs with the library versions it supports).

Reads a JSON list of cases (``config_dir``: a folder with the model's ``config.json`` and a
tokenizer, ``method``: full|lora|frozen, ``rank``, ``alpha``, ``dropout``, ``batch``,
``seq_len``, ``precision``: fp32|bf16) and prints, per case, each calculator's bytes (or why
it has none) as JSON:

- **fm-training-estimator** (foundation-model-stack): ``FullParameterTuningEstimator`` /
  ``LoraEstimator``'s ``get_total_mem_estimate()``: activations by EleutherAI's
  transformer-math formula, weights, gradients and AdamW state by bytes per parameter in its
  ``torch_dtype`` (given the dtype the run loads its weights in: float32 for full
  fine-tuning, bfloat16 for a LoRA base). It has no frozen-layer method.
- **DeepSpeed**: ``estimate_zero2_model_states_mem_needs`` of the trained model's parameters
  on one GPU without offload: model states only (2 + 18 bytes per
  parameter, mixed precision), every parameter counted as trained (its issue #5304).
- **accelerate** ``estimate-memory``: "Training using Adam", the largest of
  ``estimate_training_usage``'s terms for the model's float32 size
  (``calculate_maximum_sizes``) at the plan's dtype.

    python benchmarks/calculators_run.py CASES.json
"""

from __future__ import annotations

import json
import sys
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any


def fm_training_estimator(case: dict[str, Any]) -> float:
    from fm_training_estimator.config import FMArguments, HFTrainingArguments, PeftLoraConfig

    if case["method"] not in ("full", "lora"):
        raise LookupError(f"no {case['method']} method (full and lora only)")
    dtype = "float32" if case["method"] == "full" else "bfloat16"
    fm = FMArguments(base_model_path=case["config_dir"], block_size=case["seq_len"],
                     torch_dtype=dtype, technique=case["method"])  # fmt: skip
    train = HFTrainingArguments(output_dir=case["config_dir"] + "/out",
                                per_device_train_batch_size=case["batch"])  # fmt: skip
    if case["method"] == "full":
        from fm_training_estimator.memory.full.full import FullParameterTuningEstimator

        return float(FullParameterTuningEstimator(fm, train).get_total_mem_estimate())
    from fm_training_estimator.memory.lora.lora import LoraEstimator

    lora = PeftLoraConfig(r=case["rank"], lora_alpha=case["alpha"],
                          lora_dropout=case["dropout"], target_modules="all-linear")  # fmt: skip
    return float(LoraEstimator(fm, train, lora).get_total_mem_estimate())


def _model(case: dict[str, Any]) -> Any:
    """The trained model on the meta device (LoRA: its adapters added by peft)."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(case["config_dir"]))
    if case["method"] == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=case["rank"], lora_alpha=case["alpha"],
                                                 lora_dropout=case["dropout"],
                                                 target_modules="all-linear"))  # fmt: skip
    return model


def deepspeed(case: dict[str, Any]) -> float:
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    # DeepSpeed's model_to_params keeps one count per data_ptr (a tied weight once), and every
    # data_ptr is 0 on the meta device: counted by parameter, as parameters() yields a tied
    # weight once
    params = sum(p.numel() for p in _model(case).parameters())
    return float(estimate_zero2_model_states_mem_needs(params, 1, 1, cpu_offload=False)[1])


def accelerate(case: dict[str, Any]) -> float:
    from accelerate.commands.estimate import estimate_training_usage
    from accelerate.utils import calculate_maximum_sizes

    total, _ = calculate_maximum_sizes(_model(case))
    dtype = {"fp32": "float32", "bf16": "bfloat16"}[case["precision"]]
    return float(max(estimate_training_usage(total, dtype).values()))


TOOLS = {
    "fm-training-estimator": fm_training_estimator,
    "deepspeed": deepspeed,
    "accelerate": accelerate,
}


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")
    cases = json.loads(Path(argv[0]).read_text())
    versions = {}
    for name in (*TOOLS, "transformers", "peft"):
        try:
            versions[name] = version(name)
        except Exception:  # not installed: each case says so
            versions[name] = None
    print(json.dumps({"versions": versions}), flush=True)
    for case in cases:
        out: dict[str, Any] = {"case": case["id"]}
        for name, tool in TOOLS.items():
            try:
                out[name] = tool(case)
            except Exception as exc:  # the tool has no figure for this case: say why
                out[name] = f"{type(exc).__name__}: {exc}"[:200]
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
