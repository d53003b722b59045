"""`advisor catalog refresh` reads spot as well as on-demand, through the real client code paths.

AWS: boto3 clients wrapped in botocore's Stubber (botocore validates every request against the
service model) answering with the recorded Price List product (``fixtures/aws_*``) and a spot
price history. Azure and GCP: a local HTTP server answering with recorded Retail Prices API
items and Cloud Billing SKUs (``fixtures/azure_items.json``, ``fixtures/gcp_skus.json``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from advisor.providers.catalog import _aws, load
from advisor.providers.catalog.refresh import refresh

FIXTURES = Path(__file__).parent / "fixtures"
TODAY = dt.date(2099, 3, 4)


def _fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def _row(snapshot: str, key: str, region: str):  # type: ignore[no-untyped-def]
    found = [r for r in load(snapshot).regional if r.key == key and r.region == region]
    assert len(found) == 1
    return found[0]


def _clients() -> tuple[Any, Any, Any, Any]:
    boto3 = pytest.importorskip("boto3")
    from botocore.stub import Stubber

    creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    pricing = boto3.client("pricing", region_name="us-east-1", **creds)
    ec2 = boto3.client("ec2", region_name="us-east-1", **creds)
    return pricing, ec2, Stubber(pricing), Stubber(ec2)


def _stub_products(stub: Any, product: dict[str, Any], field: str, types: list[str]) -> None:
    """One get_products answer per chunk of types; the product in its type's chunk."""
    name = product["product"]["attributes"][field]
    for start in range(0, len(types), _aws.CHUNK):
        chunk = types[start : start + _aws.CHUNK]
        found = [json.dumps(product)] if name in chunk else []
        stub.add_response("get_products", {"PriceList": found, "FormatVersion": "aws_v1"})


def test_aws_refresh_reads_spot_as_the_lowest_zone_price() -> None:
    pricing, ec2, p_stub, e_stub = _clients()
    base = load("2026-11")
    here = [r for r in base.regional if r.provider == "aws" and r.region == "us-east-1"]
    ec2_types = sorted({r.instance_type for r in here if r.service == "ec2"})
    sm_types = sorted({r.instance_type for r in here if r.service == "sagemaker"})
    _stub_products(p_stub, _fixture("aws_ec2_product.json"), "instanceType", ec2_types)
    _stub_products(p_stub, _fixture("aws_sagemaker_product.json"), "instanceName", sm_types)
    now = dt.datetime(2099, 3, 4, 12, tzinfo=dt.timezone.utc)
    history = [  # each zone's latest price counts; the lowest zone wins
        ("us-east-1a", "0.3000", now - dt.timedelta(hours=3)),  # older, ignored
        ("us-east-1a", "0.4000", now),
        ("us-east-1b", "0.3644", now - dt.timedelta(hours=1)),
        ("us-east-1c", "0.5000", now),
    ]
    e_stub.add_response(
        "describe_spot_price_history",
        {
            "SpotPriceHistory": [
                {
                    "InstanceType": "p3.2xlarge",
                    "ProductDescription": "Linux/UNIX",
                    "SpotPrice": price,
                    "Timestamp": stamp,
                    "AvailabilityZone": zone,
                }
                for zone, price, stamp in history
            ]
        },
    )
    with p_stub, e_stub:
        result = refresh("aws", today=TODAY, pricing_client=pricing, ec2_client=ec2)
        p_stub.assert_no_pending_responses()
        e_stub.assert_no_pending_responses()
    assert result.updated == 2  # ec2:p3.2xlarge and sagemaker:ml.p3.2xlarge
    p3 = _row(result.snapshot, "ec2:p3.2xlarge", "us-east-1")
    assert (p3.on_demand_usd_per_h, p3.spot_usd_per_h) == (3.06, 0.3644)
    assert p3.price_date == "2099-03-04" and "on-demand and spot" in p3.source
    sm = _row(result.snapshot, "sagemaker:ml.p3.2xlarge", "us-east-1")
    assert sm.on_demand_usd_per_h == 3.825
    assert "kept from snapshot 2026-11" in sm.source  # SageMaker publishes no spot prices


def _serve(http_server: Callable[..., Any], body: Any, key: str) -> str:
    def handler(path: str, query: str) -> tuple[int, Any]:
        return 200, {key: body}

    return str(http_server(handler).url)


def test_azure_refresh_reads_spot_and_low_priority_meters(http_server: Callable[..., Any]) -> None:
    url = _serve(http_server, _fixture("azure_items.json"), "Items")
    result = refresh("azure", today=TODAY, url=url)
    vm = _row(result.snapshot, "azure-vm:NC4as_T4_v3", "eastus")
    assert (vm.on_demand_usd_per_h, vm.spot_usd_per_h) == (0.5, 0.1)  # Windows meter ignored
    ml = _row(result.snapshot, "azure-ml:NC4as_T4_v3", "eastus")
    assert (ml.on_demand_usd_per_h, ml.spot_usd_per_h) == (0.5, 0.105)  # Low Priority
    f4 = _row(result.snapshot, "azure-vm:F4s_v2", "eastus")
    assert f4.on_demand_usd_per_h == 0.17 and "spot 0.01859 kept" in f4.source
    # The source was read for eastus: the westus3 row keeps its price and says so.
    west = _row(result.snapshot, "azure-vm:NC4as_T4_v3", "westus3")
    assert west.spot_usd_per_h == 0.05786 and "not priced by the Azure" in west.source


def test_gcp_refresh_reads_preemptible_skus(
    http_server: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    url = _serve(http_server, _fixture("gcp_skus.json"), "skus")
    result = refresh("gcp", today=TODAY, url=url)
    row = _row(result.snapshot, "compute-engine:n1-standard-4+1xT4", "us-central1")
    # 4 vCPUs x core + 15 GiB x RAM + 1 T4, OnDemand and Spot Preemptible SKUs.
    assert row.on_demand_usd_per_h == pytest.approx(4 * 0.031611 + 15 * 0.004237 + 0.35)
    assert row.spot_usd_per_h == pytest.approx(4 * 0.006655 + 15 * 0.000892 + 0.14)
    assert "on-demand and spot" in row.source
    v4 = _row(result.snapshot, "compute-engine:v4-8", "us-central2")
    assert "not priced by the Google" in v4.source  # another region and a TPU: kept
