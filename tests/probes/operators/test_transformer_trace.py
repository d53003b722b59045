"""Transformer builders (examples/transformers.py) and their operator traces (issue #26): the
published sizes, the FLOPs of the real architecture, a billion-parameter model traced on the
meta device with no real memory, and meta traces equal to real CPU steps."""

from __future__ import annotations

import resource
import sys
from typing import Any

import pytest
import torch
from repo_paths import ROOT

# Published sizes (rounded figures; sources in examples/model_configs/README.md).
PUBLISHED = {
    "gpt2_medium": 355e6,
    "gpt2_large": 774e6,
    "gpt2_xl": 1.5e9,
    "gpt3_27": 2.7e9,
    "gpt3_67": 6.7e9,
    "gpt3_13": 13e9,
    "bert_base": 110e6,
    "bert_large": 336e6,
    "opt_13": 1.3e9,
}


@pytest.fixture(autouse=True)
def _repo_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))


def _meta_model(builder: str, **kw: Any) -> Any:
    import examples.transformers as t

    with torch.device("meta"):
        return getattr(t, builder)(**kw)


def _products(trace: Any, phase: str | None = None) -> float:
    return sum(
        o.flops * o.count
        for o in trace.operators
        if o.kind in ("linear", "bmm") and (phase is None or o.phase == phase)
    )


@pytest.mark.parametrize("builder", sorted(PUBLISHED))
def test_parameter_counts_match_published_sizes(builder: str) -> None:
    model = _meta_model(builder)[0]
    n = sum(p.numel() for p in model.parameters())  # tied weights counted once
    # within the rounding of the published figure (GPT-2 XL's "1.5B" is 1.56 B)
    assert n == pytest.approx(PUBLISHED[builder], rel=0.04)


def test_gpt2_parameter_count_is_the_architectures() -> None:
    from examples.transformers import load_config

    c = load_config("gpt2_large")
    d, layers, vocab, pos = c["n_embd"], c["n_layer"], c["vocab_size"], c["n_positions"]
    per_layer = 12 * d * d + 13 * d  # qkv, proj, 4x MLP with biases, two layer norms
    expected = vocab * d + pos * d + layers * per_layer + 2 * d  # tied head, final norm
    assert sum(p.numel() for p in _meta_model("gpt2_large")[0].parameters()) == expected


@pytest.mark.slow  # about 3 s in a fresh process (torch's meta kernels load on first use)
def test_gpt2_large_trace_has_the_real_models_flops() -> None:
    from advisor.probes.operators import trace_torch_workload

    from examples.transformers import load_config

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    trace = trace_torch_workload("examples.transformers:gpt2_large", 1)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert not trace.executed and trace.parameters == 774_030_080
    assert grown_mb < 500  # the 3 GB of weights (and 10 GB of activations) never exist
    c = load_config("gpt2_large")
    d, layers, vocab, t = c["n_embd"], c["n_layer"], c["vocab_size"], c["n_positions"]
    # forward: 24 T d^2 per layer (QKV, projection, MLP), 4 T^2 d (two attention products),
    # and the tied LM head; backward: twice that (data and weight gradients)
    forward = layers * (24 * t * d * d + 4 * t * t * d) + 2 * t * d * vocab
    assert _products(trace, "forward") == forward
    assert _products(trace, "backward") == 2 * forward
    assert 3 * forward == pytest.approx(6 * trace.parameters * t, rel=0.15)
    by_phase = trace.launches_by_phase()
    assert by_phase["backward"] > by_phase["forward"] > by_phase["optimizer"] > 0
    assert trace.memory_bytes["optimizer_state"] >= 2 * 4 * trace.parameters  # AdamW moments
    kinds = {o.kind for o in trace.operators}
    assert {"linear", "bmm", "softmax", "layernorm", "elementwise", "embedding"} <= kinds


@pytest.mark.slow  # about 4 s in a fresh process (torch's meta kernels load on first use)
def test_a_billion_parameter_model_traces_on_the_meta_device() -> None:
    from advisor.probes.operators import trace_torch_workload

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    trace = trace_torch_workload("examples.transformers:gpt3_27", 1)
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 500
    assert trace.parameters == 2_651_553_280 and not trace.executed
    seq = 2048
    assert _products(trace) == pytest.approx(6 * trace.parameters * seq, rel=0.2)


TINY = {
    "gpt2": {
        "model_type": "gpt2",
        "n_embd": 64,
        "n_head": 4,
        "n_layer": 2,
        "n_positions": 32,
        "vocab_size": 97,
    },
    "bert": {
        "model_type": "bert",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "intermediate_size": 256,
        "max_position_embeddings": 32,
        "vocab_size": 97,
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
    },
    "opt": {
        "model_type": "opt",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "ffn_dim": 256,
        "max_position_embeddings": 32,
        "vocab_size": 97,
        "word_embed_proj_dim": 32,
    },
}


@pytest.mark.slow  # real CPU steps, 2-3 s each
@pytest.mark.parametrize("family", sorted(TINY))
def test_tiny_transformers_train_on_the_cpu_as_traced_on_meta(family: str) -> None:
    from advisor.probes.operators.torch_trace import trace_step
    from advisor.probes.operators.torch_workload import meta_batch
    from torch.utils.data import DataLoader

    import examples.transformers as t

    def trace(meta: bool) -> Any:
        device = torch.device("meta") if meta else torch.device("cpu")
        with device:
            model, loss, opt, train, _ = t.build_language_model(TINY[family], seq_len=16)
        loader = DataLoader(train, batch_size=2)
        x, y = meta_batch(loader, 2) if meta else next(iter(loader))
        return trace_step(model, loss, opt, x, y, workload=family, batch_size=2)

    run, meta = trace(meta=False), trace(meta=True)
    assert run.executed and not meta.executed
    assert [(o.key, o.count) for o in run.operators] == [(o.key, o.count) for o in meta.operators]


def test_synthetic_tokens_are_drawn_on_demand() -> None:
    from examples.transformers import RandomTokens

    causal = RandomTokens(10**9, 8, 50, seed=3, shift=True)  # a billion: nothing is stored
    x, y = causal[123_456_789]
    assert x.shape == y.shape == (8,) and torch.equal(x[1:], y[:-1])
    assert torch.equal(causal[5][0], RandomTokens(10, 8, 50, seed=3, shift=True)[5][0])
    masked_x, masked_y = RandomTokens(4, 8, 50, seed=0, shift=False)[0]
    assert masked_x.shape == masked_y.shape == (8,) and int(masked_x.max()) < 50
    assert sys.getsizeof(causal) < 1000
