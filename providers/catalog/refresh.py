"""`advisor catalog refresh`: read current prices into a new dated snapshot under ADVISOR_HOME.

The price sources give prices only; machine specs come from the newest existing snapshot.
The new snapshot (``<YYYY-MM-DD>/{aws,gcp,azure}.csv``) is a complete copy of that snapshot
with the refreshed provider's rows repriced. Rows a source did not price keep their old
price, date and source (the source text says so). Nothing is written unless the source was
read and the new snapshot validates: files are written to a temporary place and renamed.
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from advisor.providers.catalog._catalog import Catalog
from advisor.providers.catalog._csv import read_accelerators, read_instances, write_instances
from advisor.providers.catalog._sources import Quote, SourceError
from advisor.providers.catalog._store import (
    ACCELERATORS_FILE,
    DATA_DIR,
    PROVIDER_FILES,
    load,
    snapshot_dir,
)
from advisor.providers.catalog._types import InstanceType

from advisor.config import user_catalog_dir
from advisor.errors import AdvisorError

FIXES = {
    "aws": "check the network and AWS credentials (the Price List API needs pricing:GetProducts), or try later.",
    "azure": "check the network or try later.",
    "gcp": "check the network and $GOOGLE_API_KEY (an API key with the Cloud Billing API enabled), or try later.",
}


# The region each source is read for unless ``region=`` is given.
SOURCE_REGIONS = {"aws": "us-east-1", "azure": "eastus", "gcp": "us-central1"}


@dataclass(frozen=True)
class RefreshResult:
    """What a refresh wrote: the new snapshot, how many rows were repriced or kept."""

    provider: str
    snapshot: str
    path: str
    base_snapshot: str
    updated: int
    kept: int
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _source_name(provider: str) -> str:
    from advisor.providers.catalog import _aws, _azure, _gcp

    return {"aws": _aws.NAME, "azure": _azure.NAME, "gcp": _gcp.NAME}[provider]


def _fetch(
    provider: str, rows: list[InstanceType], options: dict[str, Any]
) -> tuple[dict[str, Quote], list[str]]:
    if provider == "aws":
        from advisor.providers.catalog import _aws

        return _aws.fetch(rows, **options)
    if provider == "azure":
        from advisor.providers.catalog import _azure

        return _azure.fetch(rows, **options), []
    from advisor.providers.catalog import _gcp

    return _gcp.fetch(rows, **options), []


def refresh(
    provider: str,
    *,
    today: dt.date | None = None,
    base: str | None = None,
    **source_options: Any,
) -> RefreshResult:
    """Reprice ``provider``'s rows from its public price source into snapshot ``<today>``.

    ``source_options`` go to the source: AWS ``pricing_client``/``ec2_client``; Azure and
    GCP ``url`` (default from $ADVISOR_AZURE_PRICES_URL / $ADVISOR_GCP_BILLING_URL), GCP
    ``api_key`` (default $GOOGLE_API_KEY). An unreachable source raises AdvisorError and
    leaves every snapshot as it was.
    """
    if provider not in PROVIDER_FILES:
        from advisor.errors import unknown_value_error

        raise unknown_value_error("provider", provider, PROVIDER_FILES)
    day = (today or dt.date.today()).isoformat()
    catalog = load(base)
    rows = [r for r in catalog.regional if r.provider == provider]
    # A source is read for one region: rows of other regions keep their prices.
    region = source_options.get("region") or SOURCE_REGIONS[provider]
    here = [r for r in rows if r.region == region]
    name = _source_name(provider)
    try:
        quotes, notes = _fetch(provider, here, source_options)
    except SourceError as exc:
        raise AdvisorError(
            f"Could not read the {name} ({exc}). The existing snapshot {catalog.snapshot} is unchanged.",
            FIXES[provider],
        ) from exc
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # issue #18: bad items
        raise AdvisorError(
            f"The {name} answered with a malformed item ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}). The existing snapshot {catalog.snapshot} "
            "is unchanged.",
            "try again later; if it persists, the source's format changed (report it).",
        ) from exc
    if not quotes:
        raise AdvisorError(
            f"The {name} returned no price for any of the {len(rows)} {provider} machine types "
            f"of snapshot {catalog.snapshot}; nothing was written.",
            "check the region and the source's response, or try later.",
        )
    repriced = [
        _merge(r, quotes.get(r.key) if r.region == region else None, name, day, catalog.snapshot)
        for r in rows
    ]
    updated = sum(1 for r in here if r.key in quotes)
    path = _write_snapshot(catalog, day, provider, repriced)
    return RefreshResult(
        provider=provider,
        snapshot=day,
        path=str(path),
        base_snapshot=catalog.snapshot,
        updated=updated,
        kept=len(rows) - updated,
        notes=tuple(notes),
    )


def _merge(row: InstanceType, quote: Quote | None, name: str, day: str, base: str) -> InstanceType:
    if quote is None or quote.on_demand is None:
        return replace(
            row,
            source=f"{row.source} [not priced by the {name} on {day}; kept from snapshot {base}]",
        )
    where = f"{name} {day}, list price {row.region}".rstrip()
    if quote.spot is not None:
        source = f"{where}: on-demand and spot"
        spot: float | None = quote.spot
    else:
        spot = row.spot_usd_per_h
        kept = (
            "no spot price"
            if spot is None
            else f"spot {spot:g} kept from snapshot {base} ({row.price_date})"
        )
        source = f"{where}: on-demand; {kept}"
    return replace(
        row,
        on_demand_usd_per_h=quote.on_demand,
        spot_usd_per_h=spot,
        price_date=day,
        source=source,
        price_basis="read-out",  # issue #27: read from the provider's price source
        spot_basis="read-out" if quote.spot is not None else row.spot_basis,
    )


def _write_snapshot(base: Catalog, day: str, provider: str, rows: list[InstanceType]) -> Path:
    """Write the new snapshot atomically (temp folder or temp file, validated, then renamed)."""
    root = user_catalog_dir()
    root.mkdir(parents=True, exist_ok=True)
    target = root / day
    _, base_dir = snapshot_dir(base.snapshot)
    with tempfile.TemporaryDirectory(dir=root, prefix=f".{day}-") as tmp_name:
        tmp = Path(tmp_name)
        staged = tmp / day
        staged.mkdir()
        for other in PROVIDER_FILES:
            if other == provider:
                write_instances(staged / f"{other}.csv", rows)
            elif (base_dir / f"{other}.csv").is_file():
                shutil.copyfile(base_dir / f"{other}.csv", staged / f"{other}.csv")
        acc_src = base_dir / ACCELERATORS_FILE
        if acc_src.is_file() and base_dir.parent != DATA_DIR:
            shutil.copyfile(acc_src, staged / ACCELERATORS_FILE)
        _validate(staged)
        if target == base_dir:
            # Refreshing again on the same day: replace just this provider's file.
            fresh = staged / f"{provider}.csv"
            final = target / f"{provider}.csv"
            pending = target / f".{provider}.csv.new"
            shutil.move(str(fresh), pending)
            pending.replace(final)
        elif target.exists():
            raise AdvisorError(
                f"{target} exists but is not the newest snapshot {base.snapshot}.",
                f"remove {target} or pass base='{day}'.",
            )
        else:
            staged.rename(target)
    return target


def _validate(folder: Path) -> None:
    acc_path = folder / ACCELERATORS_FILE
    accelerators = read_accelerators(
        acc_path if acc_path.is_file() else DATA_DIR / ACCELERATORS_FILE
    )
    rows = []
    for provider in PROVIDER_FILES:
        path = folder / f"{provider}.csv"
        if path.is_file():
            rows += [inst for _, inst in read_instances(path, provider, accelerators)]
    Catalog.from_rows(folder.name, rows, accelerators)
