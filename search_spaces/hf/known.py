"""The open decoder models ``--model hf:<name>`` knows by name, with their architecture figures.

Each row is transcribed from the model's public ``config.json`` on the Hugging Face Hub (the
``source`` address; nothing is downloaded at run time). Only the architecture enters: hidden
size, layers, attention heads and key-value heads (grouped-query attention), the MLP's
intermediate size, the vocabulary, whether the output head shares the input embedding, the
head size where it is not hidden / heads, and the context length. Two rows (Qwen2.5 3B and 7B)
were checked against litgpt's ``litgpt/config.py``, which copies the same files. A model not
listed is given by its own ``config.json``: ``--model hf:path/to/config.json``.
"""

from __future__ import annotations

from typing import Any

HUB = "https://huggingface.co/{}/blob/main/config.json"

# name: (model_type, hidden, layers, heads, kv_heads, intermediate, vocab, tied, context, extra)
_ROWS: dict[str, tuple[str, int, int, int, int, int, int, bool, int, dict[str, Any]]] = {
    "meta-llama/Llama-3.2-1B": ("llama", 2048, 16, 32, 8, 8192, 128256, True, 131072,
                                {"head_dim": 64, "rope_theta": 500000.0}),
    "meta-llama/Llama-3.2-3B": ("llama", 3072, 28, 24, 8, 8192, 128256, True, 131072,
                                {"head_dim": 128, "rope_theta": 500000.0}),
    "meta-llama/Llama-3.1-8B": ("llama", 4096, 32, 32, 8, 14336, 128256, False, 131072,
                                {"rope_theta": 500000.0}),
    "meta-llama/Meta-Llama-3-8B": ("llama", 4096, 32, 32, 8, 14336, 128256, False, 8192,
                                   {"rope_theta": 500000.0}),
    "mistralai/Mistral-7B-v0.1": ("mistral", 4096, 32, 32, 8, 14336, 32000, False, 32768,
                                  {"sliding_window": 4096}),
    "mistralai/Mistral-7B-v0.3": ("mistral", 4096, 32, 32, 8, 14336, 32768, False, 32768,
                                  {"rope_theta": 1000000.0}),
    "Qwen/Qwen2.5-0.5B": ("qwen2", 896, 24, 14, 2, 4864, 151936, True, 32768,
                          {"rope_theta": 1000000.0}),
    "Qwen/Qwen2.5-1.5B": ("qwen2", 1536, 28, 12, 2, 8960, 151936, True, 32768,
                          {"rope_theta": 1000000.0}),
    "Qwen/Qwen2.5-3B": ("qwen2", 2048, 36, 16, 2, 11008, 151936, True, 32768,
                        {"rope_theta": 1000000.0}),
    "Qwen/Qwen2.5-7B": ("qwen2", 3584, 28, 28, 4, 18944, 152064, False, 131072,
                        {"rope_theta": 1000000.0}),
    "google/gemma-2-2b": ("gemma2", 2304, 26, 8, 4, 9216, 256000, True, 8192,
                          {"head_dim": 256, "sliding_window": 4096}),
    "google/gemma-2-9b": ("gemma2", 3584, 42, 16, 8, 14336, 256000, True, 8192,
                          {"head_dim": 256, "sliding_window": 4096}),
    "microsoft/Phi-3-mini-4k-instruct": ("phi3", 3072, 32, 32, 32, 8192, 32064, False, 4096,
                                         {}),
}  # fmt: skip


def names() -> list[str]:
    """The models known by name, as the Hub writes them."""
    return sorted(_ROWS)


def lookup(name: str) -> str | None:
    """The known name ``name`` stands for (the Hub's spelling; case and the organisation may be
    left out: ``llama-3.1-8b``), None when it is not one."""
    if name in _ROWS:
        return name
    key = name.lower()
    for known in _ROWS:
        if key in (known.lower(), known.split("/")[1].lower()):
            return known
    return None


def config_dict(name: str) -> dict[str, Any]:
    """The ``config.json`` fields of the known model ``name`` that shape its network."""
    kind, hidden, layers, heads, kv, inter, vocab, tied, context, extra = _ROWS[name]
    return {
        "model_type": kind, "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv, "intermediate_size": inter,
        "vocab_size": vocab, "tie_word_embeddings": tied, "max_position_embeddings": context,
        **extra,
    }  # fmt: skip


def source(name: str) -> str:
    """Where the figures of ``name`` come from."""
    return HUB.format(name)
