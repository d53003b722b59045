"""Azure prices from the public Retail Prices REST API (no credentials needed).

GET ``{base}?$filter=...`` answers ``{"Items": [...], "NextPageLink": url | null}``; each item
has ``armSkuName`` (``Standard_NC4as_T4_v3``), ``retailPrice`` (USD per ``unitOfMeasure``),
``type`` (``Consumption``), ``productName`` (``... Windows`` for Windows prices) and
``skuName`` ending in `` Spot`` or `` Low Priority`` for those capacities.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterable

from advisor.providers.catalog._sources import Quote, SourceError, get_json
from advisor.providers.catalog._types import InstanceType

NAME = "Azure Retail Prices API"
DEFAULT_URL = "https://prices.azure.com/api/retail/prices"
URL_ENV = "ADVISOR_AZURE_PRICES_URL"
CHUNK = 12  # SKUs per query, to keep the URL short
MAX_PAGES = 200


def base_url() -> str:
    return os.environ.get(URL_ENV, DEFAULT_URL)


def fetch(
    rows: Iterable[InstanceType], *, url: str | None = None, region: str = "eastus"
) -> dict[str, Quote]:
    """Quotes for the Azure rows, keyed by catalog key.

    ``azure-vm`` rows get the pay-as-you-go and Spot prices; ``azure-ml`` rows the same VM
    price (Azure ML adds no surcharge) and the Low Priority price as their spot price.
    """
    rows = [r for r in rows if r.provider == "azure"]
    skus = sorted({r.instance_type for r in rows})
    prices: dict[str, dict[str, float]] = {}
    for start in range(0, len(skus), CHUNK):
        chunk = skus[start : start + CHUNK]
        names = " or ".join(f"armSkuName eq 'Standard_{s}'" for s in chunk)
        query = (
            f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' "
            f"and priceType eq 'Consumption' and ({names})"
        )
        page_url: str | None = f"{url or base_url()}?{urllib.parse.urlencode({'$filter': query})}"
        pages = 0
        while page_url:
            pages += 1
            if pages > MAX_PAGES:
                raise SourceError(f"more than {MAX_PAGES} pages; stopping")
            page = get_json(page_url)
            if not isinstance(page, dict) or not isinstance(page.get("Items"), list):
                raise SourceError("the response has no 'Items' list")
            for item in page["Items"]:
                _collect(item, prices)
            page_url = page.get("NextPageLink") or None
    out: dict[str, Quote] = {}
    for r in rows:
        found = prices.get(r.instance_type)
        if not found or "on_demand" not in found:
            continue
        spot_kind = "low_priority" if r.service == "azure-ml" else "spot"
        out[r.key] = Quote(on_demand=found["on_demand"], spot=found.get(spot_kind))
    return out


def _collect(item: dict[str, object], prices: dict[str, dict[str, float]]) -> None:
    arm = str(item.get("armSkuName") or "")
    if not arm.startswith("Standard_") or item.get("type") != "Consumption":
        return
    if "windows" in str(item.get("productName", "")).lower():
        return
    if str(item.get("unitOfMeasure", "")) != "1 Hour" or item.get("currencyCode", "USD") != "USD":
        return
    sku_name = str(item.get("skuName", ""))
    kind = "on_demand"
    if sku_name.endswith(" Spot"):
        kind = "spot"
    elif sku_name.endswith(" Low Priority"):
        kind = "low_priority"
    try:
        price = float(str(item["retailPrice"]))
    except (KeyError, TypeError, ValueError):
        raise SourceError(f"item for {arm} has no numeric retailPrice") from None
    slot = prices.setdefault(arm.removeprefix("Standard_"), {})
    # Several meters can exist (e.g. per-region primary meters): keep the lowest list price.
    slot[kind] = min(price, slot.get(kind, price))
