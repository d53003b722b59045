"""Regions: rows carry their region, --region filters, the default is the cheapest region."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import pytest
from advisor.providers.catalog import load, stale_warning
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.errors import AdvisorError


def test_default_is_each_machines_cheapest_region_and_the_note_says_so() -> None:
    cat = load("2026-11")
    row = cat.get("azure-vm:NC24ads_A100_v4")
    # eastus and westus3 list 3.673 on demand; westus3's spot (0.404) is the lower.
    assert (row.region, row.spot_usd_per_h) == ("westus3", 0.40403)
    assert [r.region for r in cat.regions("azure-vm:NC24ads_A100_v4")] == [
        "westus3",
        "eastus",
        "southcentralus",
    ]
    note = cat.region_note(row)
    assert note.startswith("westus3 (cheapest of 3 regions") and "southcentralus 4.408" in note
    only = cat.get("ec2:p5.4xlarge")
    assert cat.region_note(only) == (
        "us-east-1 (the only region priced for p5.4xlarge in this snapshot)"
    )


def test_a_machine_sold_in_one_region_only_is_priced_there() -> None:
    cat = load("2026-11")
    assert cat.get("compute-engine:v4-8").region == "us-central2"
    assert "us-central1-b only" in cat.get("compute-engine:a4-highgpu-8g").source


def test_region_filter_keeps_that_regions_rows_only() -> None:
    cat = load("2026-11", region="southcentralus")
    assert {r.region for r in cat.instances} == {"southcentralus"}
    assert cat.get("azure-vm:NC24ads_A100_v4").on_demand_usd_per_h == 4.408
    assert cat.region_note(cat.get("azure-vm:NC24ads_A100_v4")) == (
        "southcentralus (asked for with --region)"
    )
    with pytest.raises(
        AdvisorError,
        match=r"'p3\.2xlarge' is not priced in region "
        r"'southcentralus' in snapshot 2026-11 \(it is in us-east-1\)",
    ):
        cat.get("p3.2xlarge")


def test_unknown_region_is_a_one_line_error_with_close_matches() -> None:
    with pytest.raises(AdvisorError, match=r"region 'westus4'. Did you mean westus"):
        load("2026-11", region="westus4")


def test_cli_region_column_and_filter() -> None:
    runner = CliRunner()
    out = runner.invoke(cli, ["catalog", "--region", "westus3", "--json", "--provider", "azure"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert rows and {r["region"] for r in rows} == {"westus3"}
    table = runner.invoke(cli, ["catalog", "--accelerator", "v4"])
    assert "us-central2" in table.stdout and "region" in table.stdout
    bad = runner.invoke(cli, ["catalog", "--region", "mars-1"])
    # main() prints an AdvisorError on one line and exits 2 (tests/advisor/cli/test_catalog.py).
    assert isinstance(bad.exception, AdvisorError) and "us-central2" in str(bad.exception)


def test_stale_warning_names_the_age_and_the_refresh_command() -> None:
    cat = load("2026-11")
    # a read-out refreshed this month (as `advisor catalog refresh` writes one)
    fresh = [dataclasses.replace(cat.get("ec2:p3.2xlarge"), price_date="2026-11")]
    assert fresh[0].price_basis == "read-out"
    assert stale_warning("2026-11", fresh, today=dt.date(2026, 11, 23)) is None
    old = stale_warning("2026-11", fresh, today=dt.date(2027, 1, 15))
    assert old is not None and old.startswith("Catalog snapshot 2026-11 is 75 days old")
    assert "advisor catalog refresh" in old
    read_out = [cat.get("ec2:p3.2xlarge"), *fresh]
    warning = stale_warning("2026-11", read_out, today=dt.date(2026, 11, 23))
    assert warning is not None
    assert "1 of 2 prices used are dated more than 30 days ago (oldest 2025-12" in warning
    # issue #27: an estimate is never fresh: dated no newer than the read-outs, and counted
    estimate = cat.get("ec2:p2.xlarge")
    assert estimate.price_basis == "estimate" and estimate.price_date <= "2025-12"
    warning = stale_warning("2026-11", [*fresh, estimate], today=dt.date(2026, 11, 23))
    assert warning is not None and "1 of 2 are estimates, not read-outs" in warning


def test_cli_warns_about_old_prices_on_stderr() -> None:
    out = CliRunner().invoke(cli, ["catalog", "--snapshot", "2021-02", "--json"])
    assert out.exit_code == 0
    json.loads(out.stdout)  # the warning does not break the JSON on stdout
    assert "Catalog snapshot 2021-02 is" in out.stderr and "catalog refresh" in out.stderr
