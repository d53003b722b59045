"""Regions: a snapshot may price one machine type in several regions.

The catalog's working set holds one row per ``service:type``: the row of the region asked for,
or else the row of the cheapest region that sells the machine (lowest on-demand price, then
lowest spot price, then the order of the snapshot file). Every region's row stays available
(``Catalog.regional``) so the choice can be explained.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from advisor.providers.catalog._types import InstanceType

from advisor.errors import AdvisorError, close_matches


def _cost(row: InstanceType) -> tuple[float, float]:
    spot = row.spot_usd_per_h if row.spot_usd_per_h is not None else float("inf")
    return (row.on_demand_usd_per_h, spot)


def by_key(rows: Iterable[InstanceType]) -> dict[str, list[InstanceType]]:
    """Rows grouped by catalog key, each group cheapest first (stable for ties)."""
    groups: dict[str, list[InstanceType]] = {}
    for row in rows:
        groups.setdefault(row.key, []).append(row)
    return {key: sorted(group, key=_cost) for key, group in groups.items()}


def pick(rows: Sequence[InstanceType], region: str | None = None) -> list[InstanceType]:
    """One row per key, in file order: ``region``'s row, or the cheapest region's.

    With ``region``, machine types not sold there are left out; a region no row has raises
    AdvisorError naming the snapshot's regions.
    """
    if region is not None:
        wanted = region.strip().lower()
        known = sorted({r.region for r in rows if r.region})
        if wanted not in {k.lower() for k in known}:
            near = close_matches(region, known)
            hint = f" Did you mean {', '.join(near)}?" if near else ""
            raise AdvisorError(
                f"No machine type is priced in region '{region}'.{hint}",
                f"use one of: {', '.join(known)} (or leave --region out for the cheapest region).",
            )
        rows = [r for r in rows if r.region.lower() == wanted]
    groups = by_key(rows)
    out, seen = [], set()
    for row in rows:
        if row.key not in seen:
            seen.add(row.key)
            out.append(groups[row.key][0])
    return out


def note(row: InstanceType, regional: Sequence[InstanceType], region: str | None) -> str:
    """Why ``row``'s region was used, for the report (e.g. ``cheapest of 3 regions ...``)."""
    if row.provider == "local":
        return "this machine"
    if region is not None:
        return f"{row.region} (asked for with --region)"
    group = by_key(r for r in regional if r.key == row.key).get(row.key, [row])
    if len(group) <= 1:
        return f"{row.region} (the only region priced for {row.instance_type} in this snapshot)"
    others = ", ".join(f"{r.region} {r.on_demand_usd_per_h:g}" for r in group)
    return (
        f"{row.region} (cheapest of {len(group)} regions priced for {row.instance_type}, "
        f"on-demand USD/h: {others}; pick another with --region)"
    )
