"""Transformer language models as advisor workloads: `advisor probe --model
examples.transformers:gpt2_large`.

Each builder follows the contract of ``examples/my_torch_model.py``: it takes the batch size,
``n_train``/``n_val`` (sequences), a seed and hyperparameters (``lr``, ``weight_decay``,
``seq_len``) and returns ``(model, loss_fn, optimizer, train_dataset, val_dataset)``. The
network is built from the model's config in ``examples/model_configs/`` (copied from the
NeuSight artefact; see its README) by :mod:`examples.transformer_blocks`.

Data are synthetic token ids, drawn per sample when a sample is read (nothing is stored), at
the config's sequence length: a causal model learns to predict the next token (inputs ids
``0..T-1``, targets ``1..T``); BERT is trained as a masked LM over every position. The loss is
cross-entropy over the vocabulary; the optimizer AdamW (lr 1e-4, weight decay 0.01).

==================  =========================================  ==========================
builder             config (sequence length)                   published size
==================  =========================================  ==========================
``gpt2_medium``     gpt2_med (1024)                            355 M (GPT-2 Medium)
``gpt2_large``      gpt2_large (1024)                          774 M (GPT-2 Large)
``gpt2_xl``         gpt2_xl (1024)                             1.5 B (GPT-2 XL)
``gpt3_xl``         gpt3_xl (2048): 24 layers of 3072          2.9 B built (see README)
``gpt3_27``         gpt3_27 (2048)                             2.7 B (GPT-3 2.7B)
``gpt3_67``         gpt3_67 (2048)                             6.7 B (GPT-3 6.7B)
``gpt3_13``         gpt3_13 (2048)                             13 B (GPT-3 13B)
``bert_base``       bert (512)                                 110 M (BERT-Base)
``bert_large``      bert_large (512)                           336 M (BERT-Large)
``opt_13``          opt_13 (2048)                              1.3 B (OPT-1.3B)
``opt_small``       opt (2048): 1 layer of 512                 -
==================  =========================================  ==========================
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

CONFIGS = Path(__file__).parent / "model_configs"
TRAIN_SEQUENCES = 100_000  # synthetic: drawn on demand, so the size costs nothing
VAL_SEQUENCES = 1_000


def load_config(name: str) -> dict[str, Any]:
    """The Hugging Face style config ``examples/model_configs/<name>.json``."""
    return dict(json.loads((CONFIGS / f"{name}.json").read_text()))


class RandomTokens(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """``n`` sequences of uniformly random token ids, each drawn when read (seeded by its
    index). ``shift``: targets are the next tokens (a causal LM); else the same positions
    (a masked LM predicting every position)."""

    def __init__(self, n: int, seq_len: int, vocab: int, seed: int, shift: bool) -> None:
        if n <= 0 or seq_len <= 0 or vocab <= 1:
            raise ValueError(f"need n, seq_len > 0 and vocab > 1, got {n}, {seq_len}, {vocab}")
        self.n, self.seq_len, self.vocab, self.seed, self.shift = n, seq_len, vocab, seed, shift

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + int(i))
        ids = torch.randint(self.vocab, (self.seq_len + int(self.shift),), generator=g)
        if self.shift:
            return ids[:-1], ids[1:]
        return ids, torch.randint(self.vocab, (self.seq_len,), generator=g)


class TokenLoss:
    """Cross-entropy of (B, T, V) logits against (B, T) token targets, over every position."""

    def __init__(self) -> None:
        self._loss = nn.CrossEntropyLoss()

    def __call__(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self._loss(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


DEPTH_KEY = {"gpt2": "n_layer", "bert": "num_hidden_layers", "opt": "num_hidden_layers"}


def _blocks(config: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a builder with its depth (``blocks``): its ``layers=`` keyword builds fewer."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        c = load_config(config)
        fn.blocks = int(c[DEPTH_KEY[c["model_type"]]])  # type: ignore[attr-defined]
        return fn

    return mark


def build_language_model(
    config: str | dict[str, Any],
    batch_size: int = 1,
    n_train: int | None = None,
    n_val: int | None = None,
    seed: int = 0,
    lr: float = 1e-4,
    weight_decay: float = 0.01,
    seq_len: int | None = None,
    layers: int | None = None,
    **_: Any,
) -> Any:
    """The workload of the model described by ``examples/model_configs/<config>.json`` (or by
    the config dict itself); ``layers``: that many of its blocks instead of all (the advisor
    traces a deep model's plan memory at 4 and 6 blocks and carries it to the builder's
    ``blocks``: ``advisor.probes.operators.layer_scaling``)."""
    from examples.transformer_blocks import Bert, Gpt2, Opt

    c = load_config(config) if isinstance(config, str) else dict(config)
    kind = c["model_type"]
    families = {
        "gpt2": (Gpt2, "n_positions", True),
        "bert": (Bert, "max_position_embeddings", False),
        "opt": (Opt, "max_position_embeddings", True),
    }
    if kind not in families:
        raise ValueError(f"config {config!r} is a {kind!r} model; known: {sorted(families)}")
    network, positions, causal = families[kind]
    if layers is not None:
        c[DEPTH_KEY[kind]] = int(layers)
    length = int(seq_len or c[positions])
    if not 0 < length <= c[positions]:
        raise ValueError(f"seq_len must be in 1..{c[positions]} for {config}, got {length}")
    torch.manual_seed(seed)
    model = network(c)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    vocab = c["vocab_size"]
    train = RandomTokens(n_train or TRAIN_SEQUENCES, length, vocab, seed, causal)
    val = RandomTokens(n_val or VAL_SEQUENCES, length, vocab, seed + 1, causal)
    return model, TokenLoss(), optimizer, train, val


@_blocks("gpt2_med")
def gpt2_medium(**kwargs: Any) -> Any:
    """GPT-2 Medium (24 layers, 1024 hidden, 16 heads), sequences of 1024."""
    return build_language_model("gpt2_med", **kwargs)


@_blocks("gpt2_large")
def gpt2_large(**kwargs: Any) -> Any:
    """GPT-2 Large (36 layers, 1280 hidden, 20 heads), sequences of 1024."""
    return build_language_model("gpt2_large", **kwargs)


@_blocks("gpt2_xl")
def gpt2_xl(**kwargs: Any) -> Any:
    """GPT-2 XL (48 layers, 1600 hidden, 25 heads), sequences of 1024."""
    return build_language_model("gpt2_xl", **kwargs)


@_blocks("gpt3_xl")
def gpt3_xl(**kwargs: Any) -> Any:
    """The artefact's ``gpt3_xl`` config (24 layers, 3072 hidden, 24 heads), sequences of 2048."""
    return build_language_model("gpt3_xl", **kwargs)


@_blocks("gpt3_27")
def gpt3_27(**kwargs: Any) -> Any:
    """GPT-3 2.7B (32 layers, 2560 hidden, 32 heads, dense attention), sequences of 2048."""
    return build_language_model("gpt3_27", **kwargs)


@_blocks("gpt3_67")
def gpt3_67(**kwargs: Any) -> Any:
    """GPT-3 6.7B (32 layers, 4096 hidden, 32 heads, dense attention), sequences of 2048."""
    return build_language_model("gpt3_67", **kwargs)


@_blocks("gpt3_13")
def gpt3_13(**kwargs: Any) -> Any:
    """GPT-3 13B (40 layers, 5120 hidden, 40 heads, dense attention), sequences of 2048."""
    return build_language_model("gpt3_13", **kwargs)


@_blocks("bert")
def bert_base(**kwargs: Any) -> Any:
    """BERT-Base as a masked LM (12 layers, 768 hidden, 12 heads), sequences of 512."""
    return build_language_model("bert", **kwargs)


@_blocks("bert_large")
def bert_large(**kwargs: Any) -> Any:
    """BERT-Large as a masked LM (24 layers, 1024 hidden, 16 heads), sequences of 512."""
    return build_language_model("bert_large", **kwargs)


def opt_13(**kwargs: Any) -> Any:
    """OPT-1.3B (24 layers, 2048 hidden, 32 heads, ReLU MLP of 8192), sequences of 2048."""
    return build_language_model("opt_13", **kwargs)


def gpt2_mini(**kwargs: Any) -> Any:
    """GPT-2 Large's architecture scaled down to train on a CPU in seconds (4 layers of 256, 4
    heads, sequences of 128, a vocabulary of 8,192): the plans' memory benchmark measures its
    real step (``benchmarks/plan_conformance.py``)."""
    config = {**load_config("gpt2_large"), "n_layer": 4, "n_embd": 256, "n_head": 4,
              "n_positions": 128, "n_ctx": 128, "vocab_size": 8192}  # fmt: skip
    return build_language_model(config, **kwargs)


def opt_small(**kwargs: Any) -> Any:
    """The artefact's small ``opt`` config (1 layer of 512, embeddings of 2048 projected in
    and out), sequences of 2048."""
    return build_language_model("opt", **kwargs)
