"""What ``--model hf:...`` says: the model (a known name or a ``config.json``) and the
fine-tuning options written after it, ``hf:meta-llama/Llama-3.1-8B,method=lora,rank=16``.

The options travel inside the reference so that everything that carries a model -- the probe
cache, the isolated worker, the trace, ``advisor export`` and ``advisor submit``'s command,
``python -m advisor.train`` -- carries the method with it, unchanged.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.search_spaces.hf import known

from advisor.errors import AdvisorError, unknown_value_error

PREFIX = "hf:"
METHODS = ("full", "lora", "qlora", "frozen")
WEIGHTS = ("pretrained", "random")
# option -> (kind, help); the config overrides make a small network of a family's real widths
OPTIONS: dict[str, tuple[type, str]] = {
    "method": (str, "full, lora, qlora or frozen"),
    "rank": (int, "LoRA rank (default 16)"),
    "alpha": (int, "LoRA alpha (default 2 x rank)"),
    "dropout": (float, "LoRA dropout on each adapter's input (default 0.05; 0 stores no mask)"),
    "targets": (str, "LoRA target modules joined by '+', or all-linear (the default)"),
    "frozen": (int, "method=frozen: the first N blocks (and the embeddings) frozen"),
    "seq_len": (int, "tokens per sequence (default 2048, at most the model's context)"),
    "weights": (str, "random (the default) or pretrained (advisor.train on the cloud machine)"),
    "layers": (int, "override num_hidden_layers (a small config of the family)"),
    "vocab": (int, "override vocab_size"),
}
DEFAULT_SEQ_LEN = 2048


@dataclass(frozen=True)
class HfRef:
    """A parsed ``hf:`` reference: ``model`` (a known name or a path to a config.json) and
    its ``options`` (``OPTIONS``' names, typed)."""

    model: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def method(self) -> str:
        return str(self.options.get("method", "full"))

    @property
    def seq_len(self) -> int:
        return int(self.options.get("seq_len", DEFAULT_SEQ_LEN))

    @property
    def is_file(self) -> bool:
        return self.model.endswith(".json")

    def text(self) -> str:
        """The reference written back (options in ``OPTIONS`` order)."""
        parts = [f"{k}={self.options[k]}" for k in OPTIONS if k in self.options]
        return ",".join([PREFIX + self.model, *parts])

    def with_options(self, **changes: Any) -> HfRef:
        """This reference with ``changes`` (None leaves an option as it is)."""
        opts = {**self.options, **{k: v for k, v in changes.items() if v is not None}}
        return parse(",".join([PREFIX + self.model, *(f"{k}={v}" for k, v in opts.items())]))


def is_hf(text: str) -> bool:
    """Whether ``text`` is an ``hf:`` model reference."""
    return str(text).startswith(PREFIX)


@functools.lru_cache(maxsize=64)  # asked once per (machine, batch) a screen forecasts
def holds_half_base(text: str) -> bool:
    """Whether the model ``text`` names keeps its frozen base in bfloat16 (an ``hf:`` model
    fine-tuned by LoRA, QLoRA or frozen blocks, ``methods.half_base``): its products run in
    bf16 under every plan's precision (``data.CausalLM`` casts when the plan does not)."""
    return is_hf(text) and parse(text).method != "full"


def parse(text: str) -> HfRef:
    """``hf:<name or config.json>[,option=value...]`` checked: a known name or an existing
    ``.json`` file, known options of the right kind."""
    body = str(text)[len(PREFIX) :] if is_hf(text) else str(text)
    model, *pairs = body.split(",")
    if not model:
        raise AdvisorError(
            "'hf:' names no model.",
            f"write hf:<name> ({', '.join(known.names()[:3])}, ...) or hf:path/to/config.json.",
        )
    options: dict[str, Any] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or key not in OPTIONS:
            raise unknown_value_error("hf: option", key or pair, OPTIONS)
        kind = OPTIONS[key][0]
        try:
            options[key] = kind(value.strip())
        except ValueError as exc:
            raise AdvisorError(
                f"hf: option {key}={value!r} is not a {kind.__name__}.",
                f"give {key} as {OPTIONS[key][1]}.",
            ) from exc
    _check(options)
    if model.endswith(".json"):
        if not Path(model).is_file():
            raise AdvisorError(
                f"No config file {model!r}.", "give the path of a model's config.json."
            )
    else:
        found = known.lookup(model)
        if found is None:
            raise AdvisorError(
                f"'{model}' is not a model advisor knows by name ({', '.join(known.names())}).",
                "give its config.json instead: --model hf:path/to/config.json.",
            )
        model = found
    return HfRef(model, options)


def _check(options: dict[str, Any]) -> None:
    if options.get("method", "full") not in METHODS:
        raise unknown_value_error("method", options["method"], METHODS)
    if options.get("weights", "pretrained") not in WEIGHTS:
        raise unknown_value_error("weights", options["weights"], WEIGHTS)
    for key in ("rank", "alpha", "seq_len", "layers", "vocab"):
        if key in options and options[key] <= 0:
            raise AdvisorError(f"hf: option {key} must be > 0, got {options[key]}.",
                               f"give {key} as {OPTIONS[key][1]}.")  # fmt: skip
    if not 0 <= options.get("dropout", 0) < 1:
        raise AdvisorError(f"hf: option dropout must be in [0, 1), got {options['dropout']}.",
                           "give dropout as a probability, e.g. dropout=0.1.")  # fmt: skip
    if options.get("frozen", 0) < 0:
        raise AdvisorError(f"hf: option frozen must be >= 0, got {options['frozen']}.",
                           "give the number of blocks to freeze.")  # fmt: skip


def for_the_run(text: str) -> str:
    """The reference ``python -m advisor.train`` builds: a model known by name, whole (no
    ``layers``/``vocab`` override) and without a ``weights`` option, with
    ``weights=pretrained`` (its weights loaded on the machine that trains); anything else as
    it is."""
    if not is_hf(text):
        return text
    ref = parse(text)
    if ref.is_file or {"weights", "layers", "vocab"} & set(ref.options):
        return text
    return ref.with_options(weights="pretrained").text()
