"""A short run that learned and then collapsed to chance, and the search's step away from the
learning-rate rule's value when the rule's own run does (issue #36).

fcn's short runs at the rule's learning rate learned and then fell back to chance at batch
512: the rule (the recipe's lr scaled by the noise scale) over-shoots there, and the search
kept its region. Now, when a rule run collapses -- its best check above the chance band, its
last check inside it -- the search enqueues the same configuration at ``1 / BACKOFF`` of its
learning rate at the same batch size (role ``backoff``), up to ``MAX_BACKOFFS`` times per
batch size, until one does not collapse. The report says which rule runs collapsed and what
the steps down gave (``advisor.accuracy.evidence.rule_check``). A run whose chance band is not
known (a user model: the number of classes is not) is never judged collapsed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

BACKOFF = 3.0  # a prior: each step divides the rule's learning rate by 3 (range 2-10)
MAX_BACKOFFS = 2  # steps per batch size: down to 1/9 of the rule's learning rate


def collapsed(curve: Sequence[Sequence[float]], band: float | None, metric: str) -> bool:
    """Whether a run's validation accuracy ``curve`` ([epochs, value] per check) rose above
    the chance ``band`` and ended inside it."""
    if band is None or metric != "val_accuracy" or len(curve) < 2:
        return False
    values = [float(v) for _, v in curve]
    return max(values) > band and values[-1] <= band


def backoff_values(hps: dict[str, Any], lr_low: float, done: int) -> dict[str, Any] | None:
    """The next step down from ``hps`` (its ``lr`` over ``BACKOFF``, kept at or above the
    space's ``lr_low``), or None when ``done`` steps were taken or no lower value is left."""
    lr = hps.get("lr")
    if done >= MAX_BACKOFFS or not isinstance(lr, int | float) or lr <= lr_low:
        return None
    return {**hps, "lr": max(float(lr) / BACKOFF, lr_low)}


def backoff_text(rule_lr: float, steps: list[dict[str, Any]]) -> str:
    """What the steps down from the rule's ``rule_lr`` at one batch size gave."""
    parts = [
        f"lr {s['lr']:.3g} ({s['lr'] / rule_lr:.2g}x the rule): {s['value']:.3f}"
        + (", collapsed too" if s["collapsed"] else "")
        for s in steps
    ]
    kept = next((s for s in steps if not s["collapsed"]), None)
    verdict = (
        f"the rule over-shoots here: {kept['lr'] / rule_lr:.2g}x its value learned"
        if kept
        else "no step down learned either"
    )
    return (
        "the rule's run learned, then collapsed to chance; stepped down: "
        + "; ".join(parts)
        + f" -- {verdict}"
    )
