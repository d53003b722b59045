"""A language model's run in tokens (issue #48): the tokens a pass trains on, and the
recommendation's tokens per second and per dollar."""

from __future__ import annotations

from typing import Any


def tokens_per_pass(workload: str, n_train: int) -> int | None:
    """Tokens one epoch trains on: ``n_train`` packed sequences of the ``hf:`` model's
    sequence length; None for any other workload."""
    from advisor.search_spaces.hf import is_hf, parse

    if not is_hf(workload) or n_train <= 0:
        return None
    return int(n_train) * parse(workload).seq_len


def token_lines(report: dict[str, Any], row: dict[str, Any] | None) -> list[str]:
    """``tokens: 20.0 M a pass x 1 epoch = 20.0 M; 5,210 tokens/s of training, 1.3 M tokens
    per USD`` for the row of an ``hf:`` model's report; nothing for other workloads."""
    per_pass = report.get("tokens_per_pass")
    if not per_pass or not row:
        return []
    epochs = row.get("epochs") or 1
    total = per_pass * epochs
    words = f"tokens: {per_pass / 1e6:.1f} M a pass x {epochs:g} epoch{'s' * (epochs != 1)}"
    training = (row.get("training_s") or {}).get("value") or (row.get("runtime_s") or {}).get(
        "value"
    )
    if training:
        words += f"; {total / training:,.0f} tokens/s of training"
    cost = (row.get("cost_usd") or {}).get("value")
    if cost:
        words += f", {total / cost / 1e6:.2f} M tokens per USD (the whole job)"
    return [words]
