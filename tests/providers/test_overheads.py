"""Per-service start-up overheads and billing granularity (providers/overheads.py)."""

from __future__ import annotations

import dataclasses

import pytest
from advisor.providers.catalog import load
from advisor.providers.overheads import (
    DOCUMENTED,
    PRIOR,
    SERVICES,
    run_overheads,
)
from advisor.providers.pricing import BILLING, BillingRule

from advisor.errors import AdvisorError
from advisor.intervals import Interval


def test_billing_rounds_up_to_the_increment_with_a_minimum() -> None:
    per_second_min_minute = BillingRule(1, 60, "x")
    assert per_second_min_minute.billed(20.2) == 60
    assert per_second_min_minute.billed(61.2) == pytest.approx(61.2)  # below 1 s: not rounded
    thirty = BillingRule(30, 30, "prior: x")
    assert thirty.billed(31) == 60
    assert thirty.billed(60) == 60
    assert thirty.status == PRIOR and per_second_min_minute.status == DOCUMENTED


def test_every_figure_has_a_source_and_a_status() -> None:
    # A prior says so at the head of its source; a documented figure names its document
    # (a pricing page or an API reference), not just any non-empty text.
    def agrees(status: str, source: str) -> bool:
        if status == PRIOR:
            return source.startswith("prior")
        return status == DOCUMENTED and any(w in source for w in ("page", "API reference"))

    for (provider, service), terms in SERVICES.items():
        billing = BILLING[service]
        if service not in ("local", "owned"):  # your own machines: no provider's bill
            assert agrees(billing.status, billing.source), (provider, service)
        for t in terms:
            assert agrees(t.status, t.source), (provider, service, t.phase)
            assert t.seconds.low < t.seconds.value < t.seconds.high, (service, t.phase)


def test_a_20_second_sagemaker_run_is_dominated_by_its_overheads() -> None:
    machine = load().get("ml.g5.xlarge")
    over = run_overheads(machine)
    train = Interval(20, 15, 30)
    assert over.wall.value > 5 * train.value  # provisioning + image pull vs 20 s training
    billed = over.billed_run(train)
    # Provisioning is not billed on SageMaker, the image pull is (DescribeTrainingJob docs).
    assert billed.value == pytest.approx(over.billed.value + 20)
    assert billed.low <= billed.value <= billed.high
    cost = over.cost(train, machine.on_demand_usd_per_h)
    assert cost.value == pytest.approx(billed.value * machine.on_demand_usd_per_h / 3600)


def test_ec2_minimum_and_data_download_term() -> None:
    ec2 = load().get("p3.2xlarge")
    assert ec2.service == "ec2"
    over = run_overheads(ec2, data_bytes=2e9)
    phases = [t.phase for t in over.terms]
    assert "data download" in phases
    download = next(t for t in over.terms if t.phase == "data download")
    assert download.seconds.value == pytest.approx(10.0)  # 2 GB at the 200 MB/s prior
    assert download.seconds.low < 10 < download.seconds.high
    assert run_overheads(ec2).billed_run(Interval(0, 0, 0)).value >= 60  # one-minute minimum


def test_unknown_service_or_negative_data_is_a_user_error() -> None:
    m = load().get("ml.g5.xlarge")
    with pytest.raises(AdvisorError):
        run_overheads(m, data_bytes=-1)
    odd = dataclasses.replace(m, provider="gcp")  # gcp/sagemaker does not exist
    with pytest.raises(AdvisorError):
        run_overheads(odd)
