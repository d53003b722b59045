"""How old prices are: each row carries its price date; warn past 30 days with the fix."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from advisor.providers.catalog._types import InstanceType

MAX_AGE_DAYS = 30
REFRESH_HINT = (
    "run `advisor catalog refresh --provider aws` (or gcp, azure), or "
    "`advisor catalog import-skypilot` where SkyPilot's catalogs are at hand"
)


def as_date(text: str) -> dt.date:
    """``2026-11-22`` or ``2026-11`` (read as the 1st of the month) as a date."""
    parts = [int(p) for p in text.split("-")]
    return dt.date(parts[0], parts[1], parts[2] if len(parts) > 2 else 1)


def age_days(text: str, today: dt.date | None = None) -> int:
    """Days from the date ``text`` to ``today`` (default: today)."""
    return ((today or dt.date.today()) - as_date(text)).days


def stale_warning(
    snapshot: str,
    rows: Iterable[InstanceType] = (),
    today: dt.date | None = None,
    max_age_days: int = MAX_AGE_DAYS,
) -> str | None:
    """A one-line warning when snapshot ``snapshot`` or the prices of ``rows`` are too old.

    None when the snapshot and every price are at most ``max_age_days`` old. The local
    machine (priced by the user) is not counted.
    """
    today = today or dt.date.today()
    priced = [r for r in rows if r.provider != "local"]
    old = [r for r in priced if age_days(r.price_date, today) > max_age_days]
    # Issue #27: an estimate (not read out from a price list) is never fresh: it is dated no
    # newer than the snapshot's read-outs, and the warning says how many prices are estimates.
    estimates = [r for r in priced if "estimate" in (r.price_basis, r.spot_basis)]
    snapshot_age = age_days(snapshot, today)
    if snapshot_age <= max_age_days and not old and not estimates:
        return None
    parts = []
    if snapshot_age > max_age_days:
        parts.append(f"Catalog snapshot {snapshot} is {snapshot_age} days old")
    if old:
        oldest = min(old, key=lambda r: as_date(r.price_date))
        parts.append(
            f"{len(old)} of {len(priced)} prices used are dated more than {max_age_days} days "
            f"ago (oldest {oldest.price_date}, {oldest.key})"
        )
    if estimates:
        parts.append(
            f"{len(estimates)} of {len(priced)} are estimates, not read-outs (each row's "
            "price_basis and source say how)"
        )
    return "; ".join(parts) + f". Prices change: {REFRESH_HINT}."
