"""The "Does not fit" note's examples: the machine types nearest to fitting come first."""

from __future__ import annotations

from types import SimpleNamespace

from advisor.evaluation.memory_checks import DOES_NOT_FIT
from advisor.report.memory import _shown


def _pair(machine: str, need: float, have: float, least: float | None = None) -> SimpleNamespace:
    memory = {"need_gib": need, "have_gib": have, "least_need_gib": least or need}
    return SimpleNamespace(
        machine=machine, batch_size=256, estimate={"memory": memory},
        error=f"{DOES_NOT_FIT}: needs {need} GiB, has {have}",
    )  # fmt: skip


def test_a_gpu_short_by_its_floor_comes_before_a_roomier_cpu_machine_short_by_more() -> None:
    """A big model's CPU machines have the most memory per device but are the furthest from
    fitting; an A100 whose plans all overflow is short by its state floor (114.3 of 79.2 GiB),
    not by its plain step's 5155.3."""
    cpu = _pair("ec2:x2idn.32xlarge", need=10923.6, have=2048.0)
    a100 = _pair("azure-vm:NC24ads_A100_v4", need=5155.3, have=79.2, least=114.3)
    t4 = _pair("ec2:g4dn.xlarge", need=5155.3, have=14.7)
    shown = _shown([cpu, t4, a100])
    order = [part.split(" at batch")[0] for part in shown.split("; ")]
    assert order == ["azure-vm:NC24ads_A100_v4", "ec2:x2idn.32xlarge", "ec2:g4dn.xlarge"]


def test_this_machine_comes_first_and_an_unknown_need_last() -> None:
    local = _pair("local:cpu", need=50.0, have=8.0)
    unknown = SimpleNamespace(machine="ec2:p3.2xlarge", batch_size=256,
                              estimate={"memory": {"have_gib": 15.8}}, error=DOES_NOT_FIT)  # fmt: skip
    gpu = _pair("ec2:p4d.24xlarge", need=60.0, have=39.4)
    order = [p.split(" at batch")[0] for p in _shown([unknown, gpu, local]).split("; ")]
    assert order == ["local:cpu", "ec2:p4d.24xlarge", "ec2:p3.2xlarge"]


def test_a_vm_and_its_managed_service_are_one_example() -> None:
    vm = _pair("azure-vm:NC24ads_A100_v4", need=120.0, have=79.2)
    ml = _pair("azure-ml:NC24ads_A100_v4", need=120.0, have=79.2)
    sagemaker = _pair("sagemaker:ml.p3.2xlarge", need=120.0, have=15.8)
    ec2 = _pair("ec2:p3.2xlarge:spot", need=120.0, have=15.8)
    four = _pair("ec2:p3.2xlarge:x4", need=30.0, have=15.8)
    order = [p.split(" at batch")[0] for p in _shown([vm, ml, sagemaker, ec2, four]).split("; ")]
    assert order == ["azure-ml:NC24ads_A100_v4", "ec2:p3.2xlarge:x4", "ec2:p3.2xlarge"]
