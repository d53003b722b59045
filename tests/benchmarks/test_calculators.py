"""`benchmarks/calculators.py`: the published memory calculators beside the measured
fine-tuning steps (issue #48). The harness calls each tool's own code; here with accelerate
(an installed dependency of peft) and without the others, which then say why they have no
figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_paths import load_benchmark


def test_accelerate_is_called_as_its_estimate_memory_command_reads_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """accelerate's "Training using Adam": 16 bytes a parameter in float32 (weights,
    gradients, two AdamW moments) of what it sizes, 8 under bf16 mixed precision, LoRA's
    adapters counted with the base; a tool that is not installed gives its error, not a
    number."""
    bench, run = load_benchmark("calculators"), load_benchmark("calculators_run")
    config = "hf:Qwen/Qwen2.5-0.5B,layers=1,vocab=256,seq_len=32"
    folder = Path(bench.config_dir(config, tmp_path))
    assert json.loads((folder / "config.json").read_text())["num_hidden_layers"] == 1
    from advisor.search_spaces.hf.build import parameters

    n = parameters(config)
    cases = [
        bench.case_of(0, {"config": config, "method": "full", "plan": "fp32", "batch": 2},
                      tmp_path),
        bench.case_of(1, {"config": config, "method": "full", "plan": "precision=bf16",
                          "batch": 2}, tmp_path),
        bench.case_of(2, {"config": config, "method": "lora", "plan": "fp32", "batch": 2},
                      tmp_path),
    ]  # fmt: skip
    assert [c["precision"] for c in cases] == ["fp32", "bf16", "fp32"]
    assert (cases[2]["rank"], cases[2]["alpha"]) == (16, 32)
    file = tmp_path / "cases.json"
    file.write_text(json.dumps(cases))
    assert run.main([str(file)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    full, half, lora = out[1:]
    # accelerate sizes the modules: Qwen's tied output weight (vocab x hidden) a second time
    # and the rotary buffers (2 x 32 floats) with the parameters
    sized = n + 256 * 896 + 64
    assert full["accelerate"] == 16 * sized
    assert half["accelerate"] == 8 * sized
    assert lora["accelerate"] > full["accelerate"]  # the adapters on top, all "trained"
    for tool in ("fm-training-estimator", "deepspeed"):
        if out[0]["versions"][tool] is None:
            assert "Error" in full[tool]


def test_the_summary_counts_each_tools_errors_against_the_measured_peak() -> None:
    bench = load_benchmark("calculators")
    rows = [
        {"errors": {"advisor": -0.02, "deepspeed": 0.5, "accelerate": -0.4}},
        {"errors": {"advisor": 0.01, "deepspeed": 1.5}},
        {"errors": {"advisor": 0.03, "deepspeed": -0.1, "accelerate": 0.2}},
    ]
    found = {s["tool"]: s for s in bench.summary(rows)}
    assert set(found) == {"advisor", "deepspeed", "accelerate"}
    assert found["advisor"]["median_abs_error"] == pytest.approx(0.02)
    assert found["deepspeed"]["under"] == 1 and found["deepspeed"]["worst_over"] == 1.5
    assert found["accelerate"]["cases"] == 2 and found["accelerate"]["worst_under"] == -0.4
