"""GCP prices from the Cloud Billing Catalog API (Compute Engine service SKUs).

GET ``{base}/services/6F81-5844-456A/skus?key=...&pageToken=...`` answers
``{"skus": [...], "nextPageToken": "..."}``. A machine is priced from its parts, as Google
bills it: vCPUs x the series' core SKU + GiB x its RAM SKU + attached GPUs x the GPU SKU
(``usageType`` OnDemand, or Preemptible for Spot VMs). TPU and Vertex AI rows are other
services and keep their snapshot prices.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any

from advisor.providers.catalog._sources import Quote, SourceError, get_json
from advisor.providers.catalog._types import InstanceType

NAME = "Google Cloud Billing Catalog API"
DEFAULT_URL = "https://cloudbilling.googleapis.com/v1"
URL_ENV = "ADVISOR_GCP_BILLING_URL"
KEY_ENV = "GOOGLE_API_KEY"
COMPUTE_ENGINE = "6F81-5844-456A"
MAX_PAGES = 500

# accelerator -> the GPU SKU description before " running in" / " attached to Spot ..."
GPU_SKUS = {
    "K80": "Nvidia Tesla K80 GPU",
    "P100": "Nvidia Tesla P100 GPU",
    "V100": "Nvidia Tesla V100 GPU",
    "T4": "Nvidia Tesla T4 GPU",
    "L4": "Nvidia L4 GPU",
    "A100-40GB": "Nvidia Tesla A100 GPU",
    "A100-80GB": "Nvidia Tesla A100 80GB GPU",
    "H100": "Nvidia H100 80GB GPU",
    "H200": "Nvidia H200 141GB GPU",
}
_PART = re.compile(
    r"^(?:Spot Preemptible )?(?P<series>[A-Z][0-9A-Za-z]*) (?:Predefined )?Instance "
    r"(?P<part>Core|Ram) running in "
)
_GPU = re.compile(r"^(?P<gpu>.+ GPU) (?:attached to Spot Preemptible VMs )?running in ")
_TYPE = re.compile(r"^(?P<series>[a-z][0-9a-z]*)-[a-z]+-\d+[a-z]*(?:\+(?P<n>\d+)x(?P<acc>.+))?$")


def base_url() -> str:
    return os.environ.get(URL_ENV, DEFAULT_URL)


def fetch(
    rows: Iterable[InstanceType],
    *,
    url: str | None = None,
    api_key: str | None = None,
    region: str = "us-central1",
) -> dict[str, Quote]:
    """Quotes for the Compute Engine rows, keyed by catalog key."""
    key = api_key or os.environ.get(KEY_ENV, "")
    if not key:
        raise SourceError(f"no API key (set ${KEY_ENV} to a Google Cloud API key)")
    parts = _sku_prices(url or base_url(), key, region)
    out: dict[str, Quote] = {}
    for r in rows:
        if r.provider != "gcp" or r.service != "compute-engine":
            continue
        quote = _price_machine(r, parts)
        if quote is not None:
            out[r.key] = quote
    return out


def _sku_prices(base: str, key: str, region: str) -> dict[tuple[str, str], float]:
    """(part, usage) -> USD per unit, e.g. (("N1", "Core"), "OnDemand") ... flattened."""
    prices: dict[tuple[str, str], float] = {}
    token = ""
    for _ in range(MAX_PAGES):
        params = {"key": key, "currencyCode": "USD", "pageSize": "5000"}
        if token:
            params["pageToken"] = token
        page = get_json(f"{base}/services/{COMPUTE_ENGINE}/skus?{urllib.parse.urlencode(params)}")
        if not isinstance(page, dict) or not isinstance(page.get("skus", []), list):
            raise SourceError("the response has no 'skus' list")
        for sku in page.get("skus", []):
            _collect(sku, region, prices)
        token = page.get("nextPageToken") or ""
        if not token:
            return prices
    raise SourceError(f"more than {MAX_PAGES} pages; stopping")


def _collect(sku: dict[str, Any], region: str, prices: dict[tuple[str, str], float]) -> None:
    if region not in sku.get("serviceRegions", []):
        return
    usage = sku.get("category", {}).get("usageType", "")
    if usage not in ("OnDemand", "Preemptible"):
        return
    description = str(sku.get("description", ""))
    part = _PART.match(description)
    gpu = _GPU.match(description)
    if part:
        name = f"{part['series'].upper()} {part['part']}"
    elif gpu:
        name = gpu["gpu"]
    else:
        return
    prices[(name, usage)] = _unit_price(sku)


def _unit_price(sku: dict[str, Any]) -> float:
    try:
        expression = sku["pricingInfo"][0]["pricingExpression"]
        # The last tier is the ongoing price (a first tier may be a free allowance).
        rate = expression["tieredRates"][-1]["unitPrice"]
        return int(rate.get("units", 0) or 0) + int(rate.get("nanos", 0) or 0) / 1e9
    except (KeyError, IndexError, TypeError, ValueError):
        raise SourceError(f"SKU {sku.get('skuId', '?')} has no readable unit price") from None


def _price_machine(row: InstanceType, parts: dict[tuple[str, str], float]) -> Quote | None:
    match = _TYPE.match(row.instance_type)
    if match is None:  # e.g. TPU types v2-8
        return None
    series = match["series"].upper()
    gpu_sku = GPU_SKUS.get(row.accelerator or "") if row.accelerator else None
    if row.accelerator and gpu_sku is None:
        return None
    prices: list[float | None] = []
    for usage in ("OnDemand", "Preemptible"):
        core = parts.get((f"{series} Core", usage))
        ram = parts.get((f"{series} Ram", usage))
        if core is None or ram is None:
            prices.append(None)
            continue
        total = row.vcpus * core + row.memory_gib * ram
        if gpu_sku:
            gpu = parts.get((gpu_sku, usage))
            if gpu is None:
                prices.append(None)
                continue
            total += row.accelerator_count * gpu
        prices.append(round(total, 6))
    if prices[0] is None:
        return None
    return Quote(on_demand=prices[0], spot=prices[1])
