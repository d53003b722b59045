"""``--method``, ``--seq-len`` and ``--tokens`` (``advisor predict`` and ``suggest``): written
into the ``hf:`` reference (the method and sequence length travel with the model) and into
the training set's size (``--tokens N``: ``N / seq_len`` packed sequences, one epoch unless
``--epochs`` is given)."""

from __future__ import annotations

from advisor.search_spaces.hf.ref import is_hf, parse

from advisor.errors import AdvisorError

METHOD_HELP = (
    "Fine-tuning method of an hf: model: full (every weight), lora (peft adapters, rank 16 on "
    "every linear layer), qlora (LoRA over a 4-bit NF4 base) or frozen (the first half of the "
    "blocks frozen). Written into the model reference (hf:NAME,method=lora)."
)
SEQ_LEN_HELP = "Tokens per sequence of an hf: model (default 2048)."
TOKENS_HELP = (
    "Training tokens of an hf: model (packed into sequences of --seq-len): sets --n-train "
    "to tokens / seq_len, and one epoch unless --epochs says more."
)


def apply_flags(
    model: str,
    n_train: int | None,
    method: str | None = None,
    seq_len: int | None = None,
    tokens: int | None = None,
    epochs: int | None = None,
) -> tuple[str, int | None, int | None]:
    """``(model, n_train, epochs)`` with the flags applied (``tokens``: the tokens trained
    on, one pass unless ``epochs`` is given); one line when they do not apply."""
    if method is None and seq_len is None and tokens is None:
        return model, n_train, epochs
    if not is_hf(model):
        raise AdvisorError(
            f"--method, --seq-len and --tokens apply to hf: models, not to {model!r}.",
            "use --model hf:<name>, or leave them out.",
        )
    if tokens is not None and n_train is not None:
        raise AdvisorError("--tokens and --n-train both give the training set's size.",
                           "give one of them.")  # fmt: skip
    if tokens is not None and tokens <= 0:
        raise AdvisorError(f"--tokens must be > 0, got {tokens}.", "give a token count.")
    ref = parse(model).with_options(method=method, seq_len=seq_len)
    if tokens is not None:
        from advisor.search_spaces.hf.build import sequences

        n_train = sequences(tokens, ref.seq_len)
        epochs = epochs or 1
    return ref.text(), n_train, epochs
