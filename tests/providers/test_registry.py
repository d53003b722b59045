"""One record per cloud (``advisor.providers.registry``): everything else that lists the clouds
follows it, and each record's modules exist and agree with it."""

from __future__ import annotations

import pytest
from advisor.providers import backends, overheads, pricing, registry
from advisor.providers.catalog import load

from advisor.errors import AdvisorError


def test_every_service_has_its_billing_rule_and_start_up_terms() -> None:
    for p in registry.PROVIDERS:
        for service in p.services:
            assert service in pricing.BILLING, f"{p.name}: no billing rule for {service}"
            assert (p.name, service) in overheads.SERVICES, f"{p.name}: no start-up for {service}"


def test_each_tuning_back_end_is_the_record_s_own() -> None:
    for p in registry.PROVIDERS:
        cls = backends.backend_class(p.name)
        assert cls.name == p.backend
        assert cls.services == p.services
        assert registry.get(p.name) is registry.get(p.backend) is p


def test_the_catalog_sells_only_the_registry_s_services() -> None:
    catalog = load()
    known = set(registry.services())
    assert {i.service for i in catalog.instances} <= known
    assert {i.provider for i in catalog.instances} <= {*registry.catalog_providers(), "local"}
    for p in registry.PROVIDERS:  # every cloud has machines on both its services
        assert {i.service for i in catalog.instances if i.provider == p.name} == set(p.services)


def test_a_vm_s_probe_job_runs_on_its_managed_service_row() -> None:
    from advisor.remote.probe import job_machine

    catalog = load()
    for key in ("ec2:g5.xlarge", "compute-engine:g2-standard-8"):
        vm = catalog.get(key)
        row = job_machine(vm, catalog)
        provider = registry.for_service(vm.service)
        assert provider is not None and row.service == provider.managed_service
        assert row.instance_type == provider.managed_type(vm.instance_type)


def test_names_and_errors() -> None:
    assert registry.backend_names() == ("sagemaker", "vertex", "azureml")
    assert registry.for_service("local") is None
    with pytest.raises(AdvisorError, match=r"Unknown provider 'sagemker'.*sagemaker"):
        registry.get("sagemker")
