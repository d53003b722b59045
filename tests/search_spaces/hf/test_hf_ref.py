"""``--model hf:...``: the reference, its options and the flags that write them (no framework
imported: these are fast)."""

from __future__ import annotations

from pathlib import Path

import pytest
from advisor.providers.train_command import train_command, train_values
from advisor.search_spaces.hf import known, parse
from advisor.search_spaces.hf.build import sequences
from advisor.search_spaces.hf.flags import apply_flags
from advisor.search_spaces.hf.ref import for_the_run
from advisor.search_spaces.workloads import ModelRef
from cli_run import error_lines, run

from advisor.errors import AdvisorError

TINY = Path(__file__).with_name("tiny_llama.json")


def test_the_named_set_is_known_with_a_source_for_each() -> None:
    for name in ("meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.2-3B", "meta-llama/Llama-3.1-8B",
                 "mistralai/Mistral-7B-v0.3", "Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-7B",
                 "google/gemma-2-2b", "google/gemma-2-9b", "microsoft/Phi-3-mini-4k-instruct"):  # fmt: skip
        assert name in known.names()
        assert known.source(name) == f"https://huggingface.co/{name}/blob/main/config.json"
        fields = known.config_dict(name)
        assert fields["num_attention_heads"] % fields["num_key_value_heads"] == 0


def test_a_reference_reads_its_model_and_options() -> None:
    ref = parse("hf:llama-3.1-8b,method=lora,rank=8,seq_len=1024")
    assert ref.model == "meta-llama/Llama-3.1-8B"
    assert (ref.method, ref.seq_len, ref.options["rank"]) == ("lora", 1024, 8)
    assert ref.text() == "hf:meta-llama/Llama-3.1-8B,method=lora,rank=8,seq_len=1024"
    assert parse(f"hf:{TINY}").is_file and parse(f"hf:{TINY}").method == "full"
    model = ModelRef("hf:Qwen/Qwen2.5-0.5B,method=qlora")
    assert model.is_user and model.is_hf and model.module == ""


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("hf:nobody/NoModel-1B", "is not a model advisor knows by name"),
        ("hf:Qwen/Qwen2.5-0.5B,method=dora", "Unknown method 'dora'"),
        ("hf:Qwen/Qwen2.5-0.5B,rank=x", "is not a int"),
        ("hf:Qwen/Qwen2.5-0.5B,colour=red", "Unknown hf: option 'colour'"),
        ("hf:missing/config.json", "No config file"),
        ("hf:Qwen/Qwen2.5-0.5B,method=lora,dropout=1.5", "option dropout must be in"),
    ],
)
def test_a_bad_reference_is_one_line(text: str, says: str) -> None:
    with pytest.raises(AdvisorError, match=says):
        parse(text)
    out = run("predict", "--model", text, "-b", "1", "-i", "ec2:g6.xlarge")
    assert out.code == 2 and len(error_lines(out.err)) == 1 and says in out.err


def test_the_flags_go_into_the_reference_and_the_training_set() -> None:
    model, n, epochs = apply_flags("hf:Qwen/Qwen2.5-0.5B", None, "lora", 1024, 20_000_000)
    assert model == "hf:Qwen/Qwen2.5-0.5B,method=lora,seq_len=1024"
    assert n == sequences(20_000_000, 1024) == 19532  # packed, the last one filled up
    assert epochs == 1  # the tokens are what is trained on
    assert apply_flags("hf:Qwen/Qwen2.5-0.5B", None, tokens=10**6, epochs=3)[2] == 3
    assert apply_flags("fcn", 10) == ("fcn", 10, None)
    with pytest.raises(AdvisorError, match="apply to hf: models"):
        apply_flags("fcn", None, "lora")
    with pytest.raises(AdvisorError, match="give one of them"):
        apply_flags("hf:Qwen/Qwen2.5-0.5B", 10, tokens=100)
    out = run("predict", "--model", "fcn", "--method", "lora", "-b", "1", "-i", "ec2:g6.xlarge")
    assert out.code == 2 and "apply to hf: models" in out.err


def test_the_run_loads_a_named_models_weights_and_the_command_carries_the_method() -> None:
    named = "hf:meta-llama/Llama-3.1-8B,method=lora"
    assert for_the_run(named) == named + ",weights=pretrained"
    small = "hf:meta-llama/Llama-3.1-8B,method=lora,layers=2"
    assert for_the_run(small) == small  # a small config of the family: random weights
    assert for_the_run(f"hf:{TINY}") == f"hf:{TINY}"
    command = train_command(train_values(device="cuda", model=named, batch_size=8))
    assert command[command.index("--model") + 1] == named


def test_the_report_speaks_in_tokens_for_an_hf_model() -> None:
    from advisor.report.tokens import token_lines, tokens_per_pass

    per_pass = tokens_per_pass("hf:Qwen/Qwen2.5-0.5B,method=lora,seq_len=1024", 19532)
    assert per_pass == 19532 * 1024 and tokens_per_pass("fcn", 100) is None
    row = {"epochs": 1, "training_s": {"value": 1000.0}, "cost_usd": {"value": 4.0}}
    (line,) = token_lines({"tokens_per_pass": per_pass}, row)
    assert line == ("tokens: 20.0 M a pass x 1 epoch; 20,001 tokens/s of training, "
                    "5.00 M tokens per USD (the whole job)")  # fmt: skip
    assert token_lines({}, row) == []
