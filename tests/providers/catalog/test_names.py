"""Native names: every provider's own spelling resolves to the catalog row, typos get hints."""

from __future__ import annotations

import pytest
from advisor.providers.catalog import load

from advisor.errors import AdvisorError


@pytest.mark.parametrize(
    ("name", "accelerator", "services", "key"),
    [
        ("p3.2xlarge", None, (), "ec2:p3.2xlarge"),
        ("ec2:p3.2xlarge:spot", None, (), "ec2:p3.2xlarge"),
        ("ml.p3.2xlarge", None, (), "sagemaker:ml.p3.2xlarge"),
        ("sagemaker:p3.2xlarge", None, (), "sagemaker:ml.p3.2xlarge"),
        ("p3.2xlarge", None, ("sagemaker",), "sagemaker:ml.p3.2xlarge"),
        ("Standard_NC6s_v3", None, ("azure-vm",), "azure-vm:NC6s_v3"),
        ("standard_nc6s_v3", None, ("azure-ml",), "azure-ml:NC6s_v3"),
        ("azure-ml:Standard_NC24ads_A100_v4", None, (), "azure-ml:NC24ads_A100_v4"),
        ("n1-standard-8", "T4", ("compute-engine",), "compute-engine:n1-standard-8+1xT4"),
        ("n1-standard-8", "nvidia-tesla-v100", ("vertex",), "vertex:n1-standard-8+1xV100"),
        ("n1-standard-16", "T4:2", ("compute-engine",), "compute-engine:n1-standard-16+2xT4"),
        ("n1-standard-16", "2xP100", ("compute-engine",), "compute-engine:n1-standard-16+2xP100"),
        ("n1-standard-8+1xT4", None, ("vertex",), "vertex:n1-standard-8+1xT4"),
        ("a2-highgpu-1g", "nvidia-tesla-a100", ("compute-engine",), "compute-engine:a2-highgpu-1g"),
        ("tpu-v2-8", None, ("compute-engine",), "compute-engine:v2-8"),
    ],
)
def test_native_spellings_resolve(
    name: str, accelerator: str | None, services: tuple[str, ...], key: str
) -> None:
    assert load("2026-11").resolve(name, accelerator, services).key == key


def test_local_resolves_to_this_machine() -> None:
    assert load("2026-11").resolve("local").provider == "local"


def test_vm_without_its_accelerator_names_the_variants() -> None:
    with pytest.raises(AdvisorError) as info:
        load("2026-11").resolve("n1-standard-8", services=("compute-engine",))
    assert "sold only with attached accelerators" in str(info.value)
    assert "compute-engine:n1-standard-8+1xT4" in str(info.value)
    assert "--accelerator T4" in str(info.value)


def test_typo_gets_did_you_mean() -> None:
    with pytest.raises(
        AdvisorError, match=r"Unknown instance type 'Standard_NC6s_v4'.*Did you mean"
    ):
        load("2026-11").resolve("Standard_NC6s_v4")
    with pytest.raises(AdvisorError, match=r"Did you mean .*p3.2xlarge"):
        load("2026-11").resolve("p3.2xlarg")


def test_same_type_on_two_services_asks_for_one() -> None:
    with pytest.raises(AdvisorError, match=r"sold by several services.*azure-vm:NC6s_v3"):
        load("2026-11").resolve("Standard_NC6s_v3")


def test_accelerator_count_that_does_not_exist_is_unknown() -> None:
    with pytest.raises(AdvisorError, match="with accelerator 'T4:3'"):
        load("2026-11").resolve("n1-standard-8", "T4:3", ("compute-engine",))
