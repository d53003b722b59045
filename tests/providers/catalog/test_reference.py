"""The 2026-11 snapshot against independent price read-outs (``fixtures/price-reference.csv``).

The fixture is a copy of the team's shared price read-out: on-demand and spot prices read from
SkyPilot's public catalog files, which are generated from the providers' price APIs. Every
matched price must agree within 1 %, or be a known exception listed here with its reason.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from advisor.providers.catalog import load
from advisor.providers.catalog._types import InstanceType

REFERENCE = Path(__file__).parent / "fixtures" / "price-reference.csv"
VM_SERVICE = {"aws": "ec2", "gcp": "compute-engine", "azure": "azure-vm"}
TOLERANCE = 0.01

# (instance type, price column) -> why the snapshot does not follow the read-out.
KNOWN_EXCEPTIONS = {
    ("ND96isr_H100_v5", "spot"): "the read-out's spot equals on-demand (suspect in the source)",
    **{
        (t, col): "the source's us-central1 A100-80GB accelerator row is out of line with its "
        "other regions (suspect); no second source"
        for t in ("a2-ultragpu-1g", "a2-ultragpu-2g", "a2-ultragpu-4g", "a2-ultragpu-8g")
        for col in ("on_demand", "spot")
    },
    **{
        ("a3-highgpu-8g", col): "the source's us-central1 H100 accelerator row is out of line "
        "with its other regions and its spot exceeds on-demand (suspect); no second source"
        for col in ("on_demand", "spot")
    },
}


def _reference() -> list[dict[str, str]]:
    with REFERENCE.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _row(ref: dict[str, str]) -> InstanceType:
    cat = load("2026-11")
    key = f"{VM_SERVICE[ref['provider']]}:{ref['instance_type']}"
    found = [r for r in cat.regional if r.key == key and r.region == ref["region"]]
    assert len(found) == 1, f"{key} in {ref['region']} is not in the snapshot"
    return found[0]


def _off(have: float | None, want: float) -> float:
    return float("inf") if have is None else abs(have - want) / want


def test_every_reference_row_is_in_the_snapshot_in_its_region() -> None:
    refs = _reference()
    assert len(refs) == 111
    for ref in refs:
        _row(ref)  # includes p5.4xlarge, p6-b200.48xlarge, a4-highgpu-8g, v4-8 in us-central2


def test_prices_match_the_read_outs_within_1_percent_or_are_known_exceptions() -> None:
    mismatches = {}
    for ref in _reference():
        row = _row(ref)
        for col, have in (("on_demand", row.on_demand_usd_per_h), ("spot", row.spot_usd_per_h)):
            want = float(ref[f"{col}_usd_per_h"])
            if _off(have, want) > TOLERANCE:
                mismatches[(ref["instance_type"], col)] = (have, want)
    assert set(mismatches) == set(KNOWN_EXCEPTIONS), {
        k: v for k, v in mismatches.items() if k not in KNOWN_EXCEPTIONS
    }


def test_known_exceptions_are_suspect_in_the_reference_and_said_so_in_the_snapshot() -> None:
    suspect = {r["instance_type"] for r in _reference() if r["note"].startswith("suspect")}
    assert {t for t, _ in KNOWN_EXCEPTIONS} == suspect
    for ref in _reference():
        if ref["instance_type"] in suspect:
            source = _row(ref).source
            assert "suspect" in source and "no second source" in source, source


def test_rows_that_follow_a_read_out_name_it_as_their_source() -> None:
    for ref in _reference():
        if ref["note"].startswith("suspect"):
            continue
        row = _row(ref)
        assert row.source.startswith("read-out: SkyPilot catalog"), row.source
        assert ref["source"].split(" (")[0] in row.source
        assert row.price_date in ("2025-12", "2024-12")


@pytest.mark.parametrize(
    ("key", "on_demand"),
    [
        ("compute-engine:c3-standard-8", 0.40322),  # was 0.3423, 15 % low
        ("compute-engine:c3-standard-22", 1.10884),  # was 0.9412
        ("compute-engine:v2-8", 4.50),  # was 6.00
    ],
)
def test_the_issues_corrections(key: str, on_demand: float) -> None:
    assert load("2026-11").get(key).on_demand_usd_per_h == on_demand


def test_nd96amsr_memory_is_the_sku_apis_1800_gib() -> None:
    cat = load("2026-11")
    for service in ("azure-vm", "azure-ml"):
        row = cat.get(f"{service}:ND96amsr_A100_v4")
        assert row.memory_gib == 1800 and row.accelerator_memory_gib == 640


def test_azure_spot_is_now_about_88_percent_off() -> None:
    cat = load("2026-11", region="eastus")
    rows = [r for r in cat.filter(services=["azure-vm"]) if "read-out" in r.source]
    discounts = sorted(
        1 - r.price(spot=True) / r.on_demand_usd_per_h for r in rows if r.spot_usd_per_h
    )
    assert len(discounts) >= 15
    assert 0.85 <= discounts[len(discounts) // 2] <= 0.92
