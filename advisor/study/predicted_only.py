"""Issue #47: the machines advisor predicts but cannot train on (TPUs), screened like the
candidates at each batch size, so the report can say where one would win (never picked)."""

from __future__ import annotations

from typing import Any

from advisor.evaluation.contract import Backend, Evaluation
from advisor.outcome import SuggestOutcome


def screen_predicted_only(outcome: SuggestOutcome, backend: Backend) -> list[dict[str, Any]]:
    """Issue #47: the machines advisor predicts but cannot train on (TPUs) at each batch size,
    screened like the candidates, so the report can say where one would win."""
    if not outcome.options.screen:
        return []
    out = []
    for cand in getattr(backend, "predicted_only", []):
        for batch in outcome.space.batch_sizes:
            pred = backend.screen(outcome.workload, cand, batch, {})
            if not isinstance(pred, Evaluation):
                continue
            out.append({"machine": cand.key, "batch_size": batch,
                        "runtime_s": pred.runtime.value, "cost_usd": pred.cost.value})  # fmt: skip
    return out
