"""Hand-built probe, machines and accelerator specs for the performance-model tests.

Accelerator figures are vendor peak specs per device (NVIDIA K80/V100/A100 data sheets, Google
Cloud TPU docs); the probe is a made-up but self-consistent small-CNN CPU probe.
"""

from __future__ import annotations

from advisor.probes.result import ProbeResult
from advisor.providers.catalog._types import AcceleratorSpec, InstanceType

SPECS = {
    "K80": AcceleratorSpec(
        "K80", "nvidia", "Kepler", 4.37, None, None, None, 12, 240, "PCIe", 16, "sheet"
    ),
    "V100": AcceleratorSpec(
        "V100", "nvidia", "Volta", 15.7, None, 125, None, 16, 900, "NVLink", 150, "sheet"
    ),
    "A100": AcceleratorSpec(
        "A100", "nvidia", "Ampere", 19.5, 156, 312, 312, 40, 1555, "NVLink", 300, "sheet"
    ),
    "TPU v3": AcceleratorSpec(
        "TPU v3", "google", "TPU v3", 0, None, None, 123, 32, 900, "ICI", 100, "docs"
    ),
}


class FakeCatalog:
    """Only what the model needs from a catalog."""

    def accelerator(self, name: str) -> AcceleratorSpec:
        return SPECS[name]


def gpu_machine(name: str, accel: str, count: int, price: float) -> InstanceType:
    return InstanceType(
        "aws",
        "ec2",
        name,
        4 * count,
        61.0 * count,
        accel,
        count,
        16.0,
        price,
        None,
        "2021-02",
        "test",
    )


def cpu_machine(name: str, vcpus: int, price: float = 0.1, provider: str = "aws") -> InstanceType:
    service = "local" if provider == "local" else "ec2"
    return InstanceType(
        provider, service, name, vcpus, 8.0, None, 0, 0.0, price, None, "2021-02", "test"
    )


LOCAL = cpu_machine("local", 2, 0.0, provider="local")


def probe(
    batch: int = 512,
    t2: float = 0.35,
    threads: int = 2,
    flops_per_sample: float | None = 20e6,
    parameters: int = 100_000,
    workload: str = "fcn",
) -> ProbeResult:
    jitter = (1.0, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.0, 1.0, 1.01)
    return ProbeResult(
        workload=workload,
        framework="torch",
        batch_size=batch,
        device="cpu",
        threads=threads,
        init_s=3.0,
        iteration_s=(t2 * 3, *(t2 * j for j in jitter)),
        validation_s=(1.2 * t2 * 212 / batch + 0.3, 1.2 * t2 * 212 / batch),
        n_train=40_512,
        n_val=212,
        flops_per_iteration=None if flops_per_sample is None else flops_per_sample * batch,
        parameters=parameters,
        gradient_bytes=4 * parameters,
    )
