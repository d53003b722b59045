"""Catalog.filter: each filter, combinations, and unknown values."""

from __future__ import annotations

import pytest
from advisor.providers.catalog import load

from advisor.errors import AdvisorError


def keys(rows: list) -> set[str]:  # type: ignore[type-arg]
    return {r.key for r in rows}


def test_no_filter_returns_everything() -> None:
    cat = load()
    assert len(cat.filter()) == len(cat.instances)


def test_provider_and_accelerator_case_insensitive() -> None:
    rows = load("2021-02").filter(providers=["AWS"], accelerators=["v100"])
    assert keys(rows) == {
        "ec2:p3.2xlarge",
        "ec2:p3.8xlarge",
        "ec2:p3.16xlarge",
        "sagemaker:ml.p3.2xlarge",
        "sagemaker:ml.p3.8xlarge",
        "sagemaker:ml.p3.16xlarge",
    }


def test_accelerator_family_matches_variants() -> None:
    cat = load("2026-11")
    a100 = {r.accelerator for r in cat.filter(accelerators=["a100"])}
    assert a100 == {"A100-40GB", "A100-80GB", "A100-80GB-PCIe"}
    tpus = cat.filter(accelerators=["tpu"])
    assert {r.accelerator for r in tpus} == {"TPU-v2", "TPU-v3", "TPU-v4", "TPU-v5e", "TPU-v6e"}
    v5e = {r.instance_type for r in cat.filter(accelerators=["v5e"])}
    assert v5e == {"v5litepod-1", "v5litepod-4", "v5litepod-8", "v5litepod-16"}


def test_cpu_selects_cpu_only_machines() -> None:
    rows = load("2026-11").filter(accelerators=["cpu"], services=["azure-vm"])
    assert rows and all(r.accelerator is None for r in rows)
    assert "azure-vm:F4s_v2" in keys(rows)


def test_gpu_count_bounds() -> None:
    cat = load("2026-11")
    rows = cat.filter(min_gpus=8, max_gpus=8)
    assert rows and all(r.accelerator_count == 8 for r in rows)
    assert all(r.accelerator_count >= 1 for r in cat.filter(min_gpus=1))


def test_max_price_on_demand_and_spot() -> None:
    cat = load("2026-11")
    cheap = cat.filter(max_price=1.0)
    assert cheap and all(r.on_demand_usd_per_h <= 1.0 for r in cheap)
    spot = cat.filter(max_price=1.0, spot=True)
    assert all(r.spot_usd_per_h is not None and r.spot_usd_per_h <= 1.0 for r in spot)
    assert len(spot) > len(cheap)  # spot makes bigger machines affordable


def test_spot_keeps_only_spot_capable() -> None:
    assert load("2021-02").filter(providers=["aws"], spot=True) == []
    assert keys(load("2021-02").filter(providers=["gcp"], spot=True)) == {
        "compute-engine:n1-standard-4+1xK80",
        "compute-engine:n1-standard-8+1xV100",
        "compute-engine:v2-8",
        "compute-engine:v3-8",
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"providers": ["awz"]}, "Unknown provider 'awz'. Did you mean aws"),
        ({"services": ["ec3"]}, "Unknown service 'ec3'. Did you mean ec2"),
        ({"accelerators": ["V200"]}, "Unknown accelerator 'V200'"),
        ({"min_gpus": 4, "max_gpus": 2}, "max_gpus \\(2\\) is below min_gpus \\(4\\)"),
        ({"max_price": 0}, "max_price must be > 0"),
    ],
)
def test_bad_filter_values(kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(AdvisorError, match=message):
        load().filter(**kwargs)
