"""AWS prices: the Price List API (boto3 ``pricing`` client) and EC2 spot price history.

``get_products`` answers ``{"PriceList": [json string, ...], "NextToken": ...}``; each string
is a product with ``product.attributes`` (``instanceType`` for EC2, ``instanceName`` for
SageMaker) and ``terms.OnDemand.<offer>.priceDimensions.<rate>.pricePerUnit.USD`` per hour.
Spot prices come from ``ec2.describe_spot_price_history``: the lowest of the region's zones'
latest prices (what a launch that may use any zone pays, as SkyPilot's catalog reads it). SageMaker managed spot training has no public price list: SageMaker
rows keep their snapshot spot price.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from typing import Any

from advisor.providers.catalog._sources import Quote, SourceError
from advisor.providers.catalog._types import InstanceType

from advisor.errors import MissingExtraError

NAME = "AWS Price List API"
LINUX_FILTERS = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
}
CHUNK = 40  # instance types per ANY_OF filter


def fetch(
    rows: Iterable[InstanceType],
    *,
    pricing_client: Any = None,
    ec2_client: Any = None,
    region: str = "us-east-1",
    spot: bool = True,
) -> tuple[dict[str, Quote], list[str]]:
    """Quotes for the AWS rows keyed by catalog key, and notes (e.g. spot not readable).

    Clients are created with boto3 unless given (tests inject stubbed ones).
    """
    rows = [r for r in rows if r.provider == "aws"]
    try:
        import botocore.exceptions as bexc
    except ImportError as exc:  # not a network fault: the fix is installing it (issue #28)
        raise MissingExtraError("boto3", "aws", "Refreshing AWS prices") from exc
    errors = (bexc.BotoCoreError, bexc.ClientError)
    if pricing_client is None:
        import boto3

        # The Price List API is served from us-east-1 whatever region is priced.
        pricing_client = boto3.client("pricing", region_name="us-east-1")
    ec2_types = sorted({r.instance_type for r in rows if r.service == "ec2"})
    sm_types = sorted({r.instance_type for r in rows if r.service == "sagemaker"})
    try:
        ec2_prices = _on_demand(
            pricing_client, "AmazonEC2", "instanceType", ec2_types, region, LINUX_FILTERS
        )
        sm_prices = _on_demand(
            pricing_client,
            "AmazonSageMaker",
            "instanceName",
            sm_types,
            region,
            {"component": "Training"},
        )
    except errors as exc:
        raise SourceError(str(exc)) from exc
    notes: list[str] = []
    spot_prices: dict[str, float] = {}
    if spot and ec2_types:
        try:
            if ec2_client is None:
                import boto3

                ec2_client = boto3.client("ec2", region_name=region)
            spot_prices = _spot(ec2_client, ec2_types)
        except errors as exc:
            notes.append(f"EC2 spot prices not read ({exc}); spot prices kept")
    out: dict[str, Quote] = {}
    for r in rows:
        price = (ec2_prices if r.service == "ec2" else sm_prices).get(r.instance_type)
        if price is not None:
            out[r.key] = Quote(on_demand=price, spot=spot_prices.get(r.instance_type))
    return out, notes


def _on_demand(
    client: Any,
    service_code: str,
    field: str,
    types: list[str],
    region: str,
    extra: dict[str, str],
) -> dict[str, float]:
    prices: dict[str, float] = {}
    base = [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": region}]
    base += [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in extra.items()]
    paginator = client.get_paginator("get_products")
    for start in range(0, len(types), CHUNK):
        chunk = types[start : start + CHUNK]
        filters = [*base, {"Type": "ANY_OF", "Field": field, "Value": ",".join(chunk)}]
        for page in paginator.paginate(
            ServiceCode=service_code, Filters=filters, FormatVersion="aws_v1"
        ):
            for text in page.get("PriceList", []):
                name, price = _parse_product(text, field)
                if name in chunk and price is not None and price > 0:
                    prices[name] = min(price, prices.get(name, price))
    return prices


def _parse_product(text: str | dict[str, Any], field: str) -> tuple[str, float | None]:
    try:
        product = json.loads(text) if isinstance(text, str) else text
        name = product["product"]["attributes"][field]
        offers = product.get("terms", {}).get("OnDemand", {})
    except (ValueError, KeyError, TypeError) as exc:
        raise SourceError(f"unreadable PriceList entry ({exc})") from exc
    for offer in offers.values():
        for dim in offer.get("priceDimensions", {}).values():
            if dim.get("unit") in ("Hrs", "Hours", "hour"):
                try:
                    return name, float(dim["pricePerUnit"]["USD"])
                except (KeyError, ValueError, TypeError):
                    continue
    return name, None


def _spot(client: Any, types: list[str]) -> dict[str, float]:
    latest: dict[tuple[str, str], tuple[dt.datetime, float]] = {}
    paginator = client.get_paginator("describe_spot_price_history")
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=6)
    for page in paginator.paginate(
        InstanceTypes=types, ProductDescriptions=["Linux/UNIX"], StartTime=start
    ):
        for item in page.get("SpotPriceHistory", []):
            key = (item["InstanceType"], item.get("AvailabilityZone", ""))
            stamp, price = item["Timestamp"], float(item["SpotPrice"])
            if key not in latest or stamp > latest[key][0]:
                latest[key] = (stamp, price)
    by_type: dict[str, list[float]] = {}
    for (itype, _), (_, price) in latest.items():
        by_type.setdefault(itype, []).append(price)
    return {t: round(min(p), 6) for t, p in by_type.items()}
