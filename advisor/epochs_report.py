"""Issue #19: the report's epochs per batch size -- how many, and whether given, measured or
predicted (from the probe's gradient noise scale, :mod:`advisor.probes.epochs_model`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from advisor.probes.epochs_model import EARLY_NOISE_CAVEAT, LR_RULE
from advisor.records import TrialRecord

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial
    from rich.console import Console

    from advisor.scoring import Evaluation


def epochs_per_batch(
    trials: Iterable[FrozenTrial], screened: Iterable[Evaluation] = ()
) -> list[dict[str, Any]]:
    """One row per batch size scored: ``EpochsEstimate.to_dict()`` as the back end recorded it
    (trials' ``TrialRecord.estimate["epochs_model"]``, then screened candidates'), by batch
    size."""
    found: dict[int, dict[str, Any]] = {}
    records = [TrialRecord.from_trial(t) for t in trials]
    estimates = [r.estimate for r in records if r is not None]
    estimates += [ev.estimate for ev in screened]
    for est in estimates:
        row = est.get("epochs_model")
        if row:
            found.setdefault(int(row["batch_size"]), row)
    return [found[b] for b in sorted(found)]


def epochs_note(rows: list[dict[str, Any]]) -> str | None:
    """The learning-rate rule the predicted epochs assume, when any epochs are predicted."""
    if not any(r["source"] == "predicted" for r in rows):
        return None
    return (
        f"Predicted epochs assume the learning rate scaled with the batch: {LR_RULE}. "
        f"{EARLY_NOISE_CAVEAT}"
    )


def render_epochs(rows: list[dict[str, Any]], console: Console) -> None:
    """Draw the epochs-per-batch-size table (every value escaped: "[x]" stays text)."""
    from rich.markup import escape
    from rich.table import Table

    if not rows:
        return
    table = Table(title="Epochs per batch size", title_justify="left")
    for col in ("batch", "epochs", "interval", "how", "basis"):
        table.add_column(col, justify="right" if col in ("batch", "epochs") else "left")
    for r in rows:
        table.add_row(
            str(r["batch_size"]),
            str(r["epochs"]),
            f"{r['low']:.1f}-{r['high']:.1f}",
            escape(str(r["source"])),
            escape(str(r["basis"])),
        )
    console.print(table)
