"""Issue #19: the report's epochs per batch size -- how many, and whether given, measured or
predicted (from the probe's gradient noise scale, :mod:`advisor.prediction.run.epochs_model`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from advisor.prediction.run.epochs_fit import FIT_CHECK
from advisor.prediction.run.epochs_model import EARLY_NOISE_CAVEAT, LR_RULE
from advisor.records import TrialRecord

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial
    from rich.console import Console

    from advisor.evaluation.contract import Scored


def epochs_per_batch(
    trials: Iterable[FrozenTrial], screened: Iterable[Scored] = ()
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
    """The learning-rate rule the modelled epochs assume, and how far to trust them: the fit's
    leave-one-out check, or the probe's early-noise caveat; None when none is modelled."""
    modelled = [r for r in rows if r["source"] in ("predicted", "fitted")]
    if not modelled:
        return None
    text = f"Modelled epochs assume the learning rate scaled with the batch: {LR_RULE}."
    if any(r.get("b_noise_from") == "fit" for r in modelled):
        text += f" {FIT_CHECK}"
    if any(r.get("b_noise_from") == "probe" for r in modelled):
        text += f" {EARLY_NOISE_CAVEAT}"
    return text


def render_epochs(rows: list[dict[str, Any]], console: Console) -> None:
    """Draw the epochs-per-batch-size table (every value escaped: "[x]" stays text)."""
    from rich.markup import escape
    from rich.table import Table

    if not rows:
        return
    table = Table(title="Epochs per batch size", title_justify="left")
    for col in ("batch", "epochs", "interval", "how", "known", "basis"):
        table.add_column(col, justify="right" if col in ("batch", "epochs", "known") else "left")
    for r in rows:
        known = r.get("known")
        table.add_row(
            str(r["batch_size"]),
            str(r["epochs"]),
            f"{r['low']:.1f}-{r['high']:.1f}",
            escape(str(r["source"])),
            "" if known is None else f"{known:g}",
            escape(str(r["basis"])),
        )
    console.print(table)
