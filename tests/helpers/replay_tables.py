"""The small replay table of the study, report and CLI tests (plausible numbers, stated in each
function): 3 AWS machines x 2 batch sizes + this machine. The fixtures ``table`` and
``table_file`` (``tests/advisor/conftest.py``) serve it."""

from __future__ import annotations

from typing import Any

from advisor.providers.catalog._types import InstanceType

from advisor.evaluation.replay import ReplayEntry, ReplayTable
from advisor.intervals import Interval


def instance(
    key: str,
    gpus: int,
    price: float,
    spot: float | None = None,
    acc: str | None = "V100",
    region: str = "",
) -> InstanceType:
    service, _, itype = key.partition(":")
    provider = {
        "ec2": "aws",
        "sagemaker": "aws",
        "vertex": "gcp",
        "compute-engine": "gcp",
        "azure-ml": "azure",
    }.get(service, "local")
    return InstanceType(
        provider=provider,
        service=service,
        instance_type=itype,
        vcpus=8 * max(gpus, 1),
        memory_gib=61.0 * max(gpus, 1),
        accelerator=acc if gpus else None,
        accelerator_count=gpus,
        accelerator_memory_gib=16.0 if gpus else 0.0,
        on_demand_usd_per_h=price,
        spot_usd_per_h=spot,
        price_date="2021-02-01",
        source="docs/method.md section 5",
        region=region,
    )


def entries(
    runtimes: dict[tuple[str, int], float], with_prediction: bool = True
) -> tuple[ReplayEntry, ...]:
    """One entry per (machine, batch) -> seconds: measured within +-5 %, the screen's
    prediction (when given) 10 % high with a -20 %/+40 % interval, each probe 30 s."""
    return tuple(
        ReplayEntry(
            m,
            b,
            Interval(rt, rt * 0.95, rt * 1.05),
            predicted=Interval(rt * 1.1, rt * 0.8, rt * 1.4) if with_prediction else None,
            probe_s=30.0,
        )
        for (m, b), rt in runtimes.items()
    )


def small_table(with_prediction: bool = True, **extra: Any) -> ReplayTable:
    """3 machines x 2 batch sizes + the local machine; runtimes shaped like docs/method.md 2.4:
    the 8-GPU machine is fastest but dearest, the K80 cheapest per hour but slow."""
    insts = [
        instance("ec2:p2.xlarge", 1, 0.90, 0.27, "K80"),
        instance("ec2:p3.2xlarge", 1, 3.06, 0.92),
        instance("ec2:p3.16xlarge", 8, 24.48, None),
        instance("local:local", 0, 0.0, None),
    ]
    runtimes = {  # seconds for 10 epochs
        ("ec2:p2.xlarge", 256): 3000.0,
        ("ec2:p2.xlarge", 512): 2800.0,
        ("ec2:p3.2xlarge", 256): 900.0,
        ("ec2:p3.2xlarge", 512): 700.0,
        ("ec2:p3.16xlarge", 256): 800.0,
        ("ec2:p3.16xlarge", 512): 300.0,
        ("local:local", 256): 20000.0,
        ("local:local", 512): 19000.0,
    }
    return ReplayTable(
        tuple(insts),
        entries(runtimes, with_prediction),
        snapshot="test-2021-02",
        epochs=10,
        **extra,
    )
