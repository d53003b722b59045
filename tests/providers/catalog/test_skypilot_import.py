"""`advisor catalog import-skypilot` on small files in SkyPilot's vms.csv layouts.

``fixtures/skypilot/v7/{aws,gcp,azure}/vms.csv`` copy the column layouts of SkyPilot's
catalogs (AWS v7 with AvailabilityZone and GpuInfo, GCP v8 with accelerator rows without an
instance type, Azure v6 without zones). Most values are real rows of those files; a few zones
are made up to exercise the rules (lowest zone, spot at or above on-demand dropped).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from advisor.providers.catalog import load
from advisor.providers.catalog.skypilot import find_files, import_skypilot
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.config import user_catalog_dir
from advisor.errors import AdvisorError

FIXTURES = Path(__file__).parent / "fixtures" / "skypilot"


def _row(snapshot: str, key: str, region: str):  # type: ignore[no-untyped-def]
    found = [r for r in load(snapshot).regional if r.key == key and r.region == region]
    assert len(found) == 1, (key, region)
    return found[0]


def test_newest_version_folder_is_used() -> None:
    files = find_files(FIXTURES)
    assert set(files) == {"aws", "gcp", "azure"}
    assert all(p.parent.parent.name == "v7" for p in files.values())


def test_import_prices_each_region_with_the_lowest_zone() -> None:
    result = import_skypilot(FIXTURES, name="2099-01-02")
    assert result.snapshot == "2099-01-02" and result.base_snapshot == "2026-11"
    p3 = _row("2099-01-02", "ec2:p3.2xlarge", "us-east-1")
    assert (p3.on_demand_usd_per_h, p3.spot_usd_per_h) == (3.06, 0.3644)
    assert "SkyPilot catalog v7/aws/vms.csv" in p3.source and "lowest zone" in p3.source
    west = _row("2099-01-02", "ec2:p3.2xlarge", "us-west-2")
    assert west.spot_usd_per_h == 0.5
    # Default: the cheapest region (same on-demand, lower spot in us-east-1).
    assert load("2099-01-02").get("ec2:p3.2xlarge").region == "us-east-1"


def test_spot_at_or_above_on_demand_is_not_used() -> None:
    import_skypilot(FIXTURES, name="2099-01-02")
    row = _row("2099-01-02", "ec2:g5.xlarge", "ap-south-1")
    assert row.spot_usd_per_h is None and "not used" in row.source
    assert _row("2099-01-02", "ec2:g5.xlarge", "us-east-1").spot_usd_per_h == 0.4328


def test_gcp_gpu_vms_are_vm_plus_accelerator_rows_and_tpus_their_slice_row() -> None:
    import_skypilot(FIXTURES, name="2099-01-02")
    t4 = _row("2099-01-02", "compute-engine:n1-standard-8+1xT4", "us-central1")
    assert t4.on_demand_usd_per_h == pytest.approx(0.37995 + 0.35)
    assert t4.spot_usd_per_h == pytest.approx(0.07599 + 0.15)  # zone b's sum is the lowest
    assert "VM row + accelerator row" in t4.source
    a2 = _row("2099-01-02", "compute-engine:a2-highgpu-1g", "us-central1")
    # The same sums as SkyPilot's own a2-highgpu-1g price (price-reference.csv).
    assert (a2.on_demand_usd_per_h, a2.spot_usd_per_h) == (3.67339, 1.92802)
    v6e = _row("2099-01-02", "compute-engine:v6e-4", "us-central1")
    assert (v6e.on_demand_usd_per_h, v6e.spot_usd_per_h) == (10.8, 2.17683)
    # europe-west4 lists the VM but no T4: the GPU VM is not priced there.
    cat = load("2099-01-02")
    regions = {r.region for r in cat.regional if r.key == "compute-engine:n1-standard-8+1xT4"}
    assert regions == {"us-central1"}


def test_azure_and_unpriced_rows() -> None:
    result = import_skypilot(FIXTURES, name="2099-01-02")
    cat = load("2099-01-02")
    nc6 = {r.region: r.spot_usd_per_h for r in cat.regional if r.key == "azure-vm:NC6s_v3"}
    assert nc6 == {"eastus": 0.3978, "westus3": 0.3366}
    managed = cat.get("sagemaker:ml.p3.2xlarge")
    assert "managed service" in managed.source and "kept from snapshot 2026-11" in managed.source
    v3 = cat.get("compute-engine:v3-8")
    assert "not listed by SkyPilot" in v3.source
    # aws 5 (c5 1, g5 2, p3 2), gcp 4 (a2, n1+T4, v2-8, v6e-4), azure 3 (F4s 1, NC6s 2)
    assert result.priced == 12 and result.kept == len(cat.regional) - 12


def test_region_option_narrows_the_import() -> None:
    result = import_skypilot(FIXTURES, name="2099-01-03", regions=["us-west-2"])
    cat = load("2099-01-03")
    assert result.priced == 1 and result.regions == 1
    assert cat.get("ec2:p3.2xlarge").region == "us-west-2"


def test_unknown_layout_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    root = tmp_path / "cat"
    shutil.copytree(FIXTURES / "v7", root)
    (root / "gcp" / "vms.csv").write_text(
        "Name,HourlyCost,Zone\nn1-standard-8,0.38,us-central1-a\n"
    )
    with pytest.raises(AdvisorError, match=r"not in a SkyPilot catalog layout.*Region"):
        import_skypilot(root, name="2099-01-04")
    assert not (user_catalog_dir() / "2099-01-04").exists()


def test_folder_without_catalogs_and_existing_snapshot_are_errors(tmp_path: Path) -> None:
    with pytest.raises(AdvisorError, match="No SkyPilot catalog"):
        import_skypilot(tmp_path)
    import_skypilot(FIXTURES, name="2099-01-02")
    with pytest.raises(AdvisorError, match="exists already"):
        import_skypilot(FIXTURES, name="2099-01-02")


def test_cli_import_then_list() -> None:
    runner = CliRunner()
    out = runner.invoke(
        cli, ["catalog", "import-skypilot", str(FIXTURES / "v7"), "--name", "2099-02", "--json"]
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["snapshot"] == "2099-02"
    listed = runner.invoke(cli, ["catalog", "--snapshot", "2099-02", "--json", "--provider", "gcp"])
    rows = {r["key"]: r for r in json.loads(listed.stdout)}
    assert rows["compute-engine:v2-8"]["on_demand_usd_per_h"] == 4.5
