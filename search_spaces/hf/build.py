"""The workload of an ``hf:`` model: a transformers causal LM built from its config, the
method applied, synthetic tokens (``advisor probe``/``predict``/``suggest`` and
``python -m advisor.train`` call it as any builder).

The model is built from its config by ``AutoModelForCausalLM.from_config`` (on the meta
device for the trace and the memory model): nothing is downloaded. With ``weights=pretrained``
(what ``python -m advisor.train`` adds for a model known by name: the real job on the cloud
machine) it loads its weights with ``from_pretrained`` (the user's ``HF_TOKEN`` from the
environment, as ``huggingface_hub`` reads it), QLoRA's in 4 bits through
``BitsAndBytesConfig``. The data are sequences of
``seq_len`` random token ids (packed: every position a target), the next token predicted;
``n_train`` sequences stand for ``--tokens N`` (``N / seq_len``, rounded up).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from advisor.search_spaces.hf import known
from advisor.search_spaces.hf.ref import HfRef, parse

from advisor.errors import AdvisorError

TRAIN_SEQUENCES = 10_000
VAL_SEQUENCES = 100


def config_of(ref: HfRef) -> Any:
    """The transformers config of ``ref``, its overrides applied (``layers``, ``vocab``)."""
    from transformers import AutoConfig

    if ref.is_file:
        try:
            fields = dict(json.loads(Path(ref.model).read_text()))
        except (OSError, ValueError) as exc:
            raise AdvisorError(f"Cannot read {ref.model}: {exc}.",
                               "give the path of a model's config.json.") from exc  # fmt: skip
    else:
        fields = known.config_dict(ref.model)
    kind = fields.pop("model_type", None)
    if not kind:
        raise AdvisorError(f"{ref.model} has no model_type.", "give a transformers config.json.")
    if "layers" in ref.options:
        fields["num_hidden_layers"] = ref.options["layers"]
    if "vocab" in ref.options:
        fields["vocab_size"] = ref.options["vocab"]
    try:
        config = AutoConfig.for_model(kind, **fields)
    except ValueError as exc:
        raise AdvisorError(f"transformers does not know the model type {kind!r}.",
                           "give a config.json of a causal language model.") from exc  # fmt: skip
    config.use_cache = False
    return config


def parameters(ref: HfRef | str) -> int:
    """The model's parameter count (built on the meta device)."""
    import torch

    with torch.device("meta"):
        model = _network(parse(str(ref)) if isinstance(ref, str) else ref, traced=True)
    return sum(p.numel() for p in model.parameters())


def _network(ref: HfRef, traced: bool) -> Any:
    from transformers import AutoModelForCausalLM

    config = config_of(ref)
    pretrained = not traced and not ref.is_file and ref.options.get("weights") == "pretrained"
    if pretrained:
        import torch

        # full: float32 master weights; else the base in bfloat16 (methods.half_base)
        kw: dict[str, Any] = {"dtype": torch.float32 if ref.method == "full" else torch.bfloat16}
        if ref.method == "qlora":
            from transformers import BitsAndBytesConfig

            kw["quantization_config"] = BitsAndBytesConfig(
                load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                bnb_4bit_compute_dtype=torch.bfloat16)  # fmt: skip
        model = AutoModelForCausalLM.from_pretrained(ref.model, config=config, **kw)
    else:
        model = AutoModelForCausalLM.from_config(config)
    from advisor.search_spaces.hf.methods import apply_method

    return apply_method(model, ref, traced=traced)


def build(
    model: str,
    batch_size: int = 1,
    n_train: int | None = None,
    n_val: int | None = None,
    seed: int = 0,
    lr: float = 2e-4,
    weight_decay: float = 0.0,
    **_: Any,
) -> Any:
    """``(model, loss_fn, optimizer, train_dataset, val_dataset)`` of the ``hf:`` reference
    ``model``: AdamW over the trainable parameters (lr 2e-4, the common LoRA default)."""
    import torch
    from advisor.search_spaces.hf.data import CausalLM, RandomTokens, TokenLoss
    from advisor.search_spaces.hf.methods import trainable_parameters

    ref = parse(model)
    config = config_of(ref)
    limit = int(getattr(config, "max_position_embeddings", ref.seq_len) or ref.seq_len)
    if ref.seq_len > limit:
        raise AdvisorError(f"seq_len={ref.seq_len} is longer than {ref.model}'s context ({limit}).",
                           f"give seq_len=1..{limit}.")  # fmt: skip
    traced = torch.empty(0).is_meta
    torch.manual_seed(seed)
    network = CausalLM(_network(ref, traced))
    optimizer = torch.optim.AdamW(trainable_parameters(network), lr=lr, weight_decay=weight_decay)
    vocab = int(config.vocab_size)
    train = RandomTokens(n_train or TRAIN_SEQUENCES, ref.seq_len, vocab, seed)
    val = RandomTokens(n_val or VAL_SEQUENCES, ref.seq_len, vocab, seed + 1)
    return network, TokenLoss(), optimizer, train, val


def sequences(tokens: int, seq_len: int) -> int:
    """Sequences of ``seq_len`` that hold ``tokens`` (packed; the last one filled up)."""
    return max(1, math.ceil(tokens / seq_len))
