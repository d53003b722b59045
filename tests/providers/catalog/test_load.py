"""Loading the shipped snapshots through the public API, and the lookups."""

from __future__ import annotations

import pytest
from advisor.providers import catalog
from advisor.providers.catalog import load, local_machine, snapshots

from advisor.errors import AdvisorError

# docs/method.md section 5, February 2021, USD per hour on demand.
REFERENCE_2021 = {
    "ec2:p2.xlarge": ("K80", 1, 0.90),
    "ec2:p2.8xlarge": ("K80", 8, 7.20),
    "ec2:p2.16xlarge": ("K80", 16, 14.40),
    "ec2:p3.2xlarge": ("V100", 1, 3.06),
    "ec2:p3.8xlarge": ("V100", 4, 12.24),
    "ec2:p3.16xlarge": ("V100", 8, 24.48),
    "sagemaker:ml.p2.xlarge": ("K80", 1, 1.26),
    "sagemaker:ml.p2.8xlarge": ("K80", 8, 8.64),
    "sagemaker:ml.p2.16xlarge": ("K80", 16, 16.6),
    "sagemaker:ml.p3.2xlarge": ("V100", 1, 3.8),
    "sagemaker:ml.p3.8xlarge": ("V100", 4, 14.7),
    "sagemaker:ml.p3.16xlarge": ("V100", 8, 28.15),
    "azure-vm:NC6": ("K80", 1, 0.90),
    "azure-vm:NC12": ("K80", 2, 1.80),
    "azure-vm:NC24": ("K80", 4, 3.60),
    "compute-engine:n1-standard-4+1xK80": ("K80", 1, 0.45),
    "compute-engine:n1-standard-8+1xV100": ("V100", 1, 2.48),
    "compute-engine:v2-8": ("TPU-v2", 4, 4.50),
    "compute-engine:v3-8": ("TPU-v3", 4, 8.00),
}


def test_both_shipped_snapshots_are_listed_and_newest_is_default() -> None:
    assert {"2021-02", "2026-11"} <= set(snapshots())
    assert load().snapshot == max(snapshots())
    assert catalog.load("2026-11").snapshot == "2026-11"


def test_2021_snapshot_has_exactly_the_reference_prices() -> None:
    cat = load("2021-02")
    for key, (acc, count, price) in REFERENCE_2021.items():
        row = cat.get(key)
        assert (row.accelerator, row.accelerator_count, row.on_demand_usd_per_h) == (
            acc,
            count,
            price,
        )
        assert row.price_date == "2021-02"
        assert "docs/method.md section 5" in row.source
    # Azure ML bills the VM price: the same reference prices, nothing else added.
    extra = {i.key for i in cat.instances} - set(REFERENCE_2021)
    assert extra == {"azure-ml:NC6", "azure-ml:NC12", "azure-ml:NC24"}
    assert cat.get("azure-ml:NC12").on_demand_usd_per_h == 1.80


def test_2026_snapshot_covers_todays_training_types_with_spot_prices() -> None:
    cat = load("2026-11")
    services = {i.service for i in cat.instances}
    assert services == {"ec2", "sagemaker", "compute-engine", "vertex", "azure-vm", "azure-ml"}
    by_provider: dict[str, set[str]] = {}
    for inst in cat.instances:
        by_provider.setdefault(inst.provider, set()).add(inst.accelerator or "cpu")
    wanted = {
        "T4",
        "A10G",
        "L4",
        "L40S",
        "A100-40GB",
        "A100-80GB",
        "H100",
        "H200",
        "V100",
        "K80",
        "cpu",
    }
    assert wanted <= by_provider["aws"]
    assert {"T4", "L4", "A100-40GB", "A100-80GB", "H100", "H200", "V100", "P100"} <= by_provider[
        "gcp"
    ]
    assert {"TPU-v2", "TPU-v3", "TPU-v4", "TPU-v5e", "TPU-v6e", "cpu"} <= by_provider["gcp"]
    assert {
        "T4",
        "A100-80GB-PCIe",
        "A100-40GB",
        "H100",
        "H200",
        "A10",
        "V100-PCIe",
        "cpu",
    } <= by_provider["azure"]
    for service in ("ec2", "sagemaker", "compute-engine", "vertex", "azure-vm", "azure-ml"):
        rows = [i for i in cat.instances if i.service == service]
        assert any(i.accelerator for i in rows) and any(i.spot_usd_per_h for i in rows), service
    for inst in cat.regional:
        # Read-outs carry their own date (late 2025, Azure about 2024); issue #27: an estimate
        # (best knowledge, literature, derived) is dated no newer than its provider's read-outs.
        newest = {"aws": "2025-12", "gcp": "2025-12", "azure": "2024-12"}[inst.provider]
        assert inst.price_date[:7] <= newest, inst.key
        if inst.price_basis == "read-out":
            assert inst.source.startswith("read-out") or "confirmed by a read-out" in inst.source
        else:
            assert inst.price_basis == "estimate" and not inst.source.startswith("read-out")
            assert any(
                w in inst.source for w in ("best knowledge", "literature", "modelled", "Azure ML")
            ), inst.key
        if inst.spot_usd_per_h is not None:
            assert inst.spot_usd_per_h < inst.on_demand_usd_per_h


def test_2026_snapshot_carries_the_later_literature_figures() -> None:
    cat = load("2026-11")
    figures = {
        "azure-vm:F4s_v2": 0.169,
        "azure-vm:NC4as_T4_v3": 0.526,
        "ec2:g4dn.xlarge": 0.526,
        "compute-engine:n1-standard-4+1xT4": 0.54,
        "compute-engine:v3-8": 8.00,
    }
    for key, price in figures.items():
        row = cat.get(key)
        assert row.on_demand_usd_per_h == price
        # The read-outs confirmed the literature's on-demand figures and replaced them.
        assert row.source.startswith("read-out"), row.source
    # v2-8 was 6.00 in the literature; the read-out says 4.50.
    assert cat.get("compute-engine:v2-8").on_demand_usd_per_h == 4.5


def test_every_accelerator_has_the_figures_the_performance_model_needs() -> None:
    specs = load().accelerators
    assert len(specs) >= 19
    for spec in specs.values():
        assert spec.fp32_tflops > 0 and spec.memory_bandwidth_gbs > 0 and spec.link_gbs > 0
        assert spec.memory_gib > 0 and spec.link in ("PCIe", "NVLink", "ICI")
        assert any(doc in spec.source for doc in ("datasheet", "docs", "whitepaper"))
    assert specs["V100"].fp32_tflops == 15.7 and specs["V100"].link == "NVLink"
    assert specs["A100-80GB"].memory_bandwidth_gbs == 2039
    assert specs["H100"].link_gbs == 450  # 900 GB/s NVLink, both directions
    # GeForce: FP16 tensor math with FP32 accumulate at half the FP16-accumulate rate
    assert specs["RTX4090"].fp16_tflops == 165.2 and specs["RTX4090"].memory_bandwidth_gbs == 1008


def test_instance_accelerator_memory_is_the_total_of_its_devices() -> None:
    cat = load()
    for inst in cat.instances:
        if inst.accelerator:
            spec = cat.accelerator(inst.accelerator)
            assert inst.accelerator_memory_gib == pytest.approx(
                spec.memory_gib * inst.accelerator_count
            )


def test_get_accepts_keys_bare_unique_names_and_spot_suffix() -> None:
    cat = load("2021-02")
    assert cat.get("p3.2xlarge").key == "ec2:p3.2xlarge"
    assert cat.get("sagemaker:ml.p3.2xlarge:spot").on_demand_usd_per_h == 3.8
    assert cat.get("EC2:P3.2XLARGE").key == "ec2:p3.2xlarge"
    assert cat.get("local:local").provider == "local"


def test_unknown_instance_type_names_close_matches() -> None:
    with pytest.raises(AdvisorError) as err:
        load("2021-02").get("p3.2xlarg")
    assert "Unknown instance type 'p3.2xlarg'" in str(err.value)
    assert "p3.2xlarge" in str(err.value) and "To fix:" in str(err.value)


def test_ambiguous_bare_name_lists_the_services() -> None:
    with pytest.raises(AdvisorError, match="azure-vm:NC6, azure-ml:NC6"):
        load("2021-02").get("NC6")


def test_accelerator_lookup_is_case_insensitive_and_unknown_lists_valid() -> None:
    cat = load()
    assert cat.accelerator("h100").name == "H100"
    with pytest.raises(AdvisorError, match=r"Unknown accelerator 'Z9'.*use one of: .*H100"):
        cat.accelerator("Z9")


def test_unknown_snapshot_lists_the_valid_ones() -> None:
    with pytest.raises(AdvisorError, match=r"Unknown snapshot '2020-01'.*2021-02, 2026-11"):
        load("2020-01")


def test_local_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.delenv("ADVISOR_LOCAL_PRICE", raising=False)
    local = local_machine()
    assert (local.provider, local.service, local.instance_type) == ("local", "local", "local")
    assert local.vcpus == os.cpu_count() and local.accelerator is None
    assert local.on_demand_usd_per_h == 0.0 and local.source == "this machine"
    monkeypatch.setenv("ADVISOR_LOCAL_PRICE", "2.85")
    assert local_machine().on_demand_usd_per_h == 2.85
    monkeypatch.setenv("ADVISOR_LOCAL_PRICE", "cheap")
    with pytest.raises(AdvisorError, match="ADVISOR_LOCAL_PRICE='cheap' is not a number"):
        local_machine()
