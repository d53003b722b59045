"""Typed rows of the instance catalog."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from advisor.providers import registry

PROVIDERS = (*registry.catalog_providers(), registry.LOCAL)
SERVICES = registry.services()


@dataclass(frozen=True)
class InstanceType:
    """One purchasable machine type with its list prices (USD per hour).

    ``accelerator`` is None for CPU-only machines; ``spot_usd_per_h`` is None where the
    service sells no spot/preemptible capacity. ``source`` says where the price was read,
    or that it is best knowledge rather than a read-out.
    """

    provider: str
    service: str
    instance_type: str
    vcpus: int
    memory_gib: float
    accelerator: str | None
    accelerator_count: int
    accelerator_memory_gib: float
    on_demand_usd_per_h: float
    spot_usd_per_h: float | None
    price_date: str
    source: str
    region: str = ""

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ValueError(f"provider must be one of {PROVIDERS}, but got {self.provider!r}")
        if self.service not in SERVICES:
            raise ValueError(f"service must be one of {SERVICES}, but got {self.service!r}")
        if self.vcpus <= 0:
            raise ValueError(f"vcpus must be > 0, but got {self.vcpus}")
        if self.accelerator_count < 0:
            raise ValueError(f"accelerator_count must be >= 0, but got {self.accelerator_count}")
        if (self.accelerator is None) != (self.accelerator_count == 0):
            raise ValueError(
                "accelerator and accelerator_count must agree, but got "
                f"accelerator={self.accelerator!r}, accelerator_count={self.accelerator_count}"
            )
        if self.on_demand_usd_per_h < 0:
            raise ValueError(f"on_demand_usd_per_h must be >= 0, got {self.on_demand_usd_per_h}")
        if self.spot_usd_per_h is not None and self.spot_usd_per_h < 0:
            raise ValueError(f"spot_usd_per_h must be >= 0, got {self.spot_usd_per_h}")

    @property
    def key(self) -> str:
        """A unique, human-readable id: ``service:instance_type`` (e.g. ``ec2:p3.2xlarge``)."""
        return f"{self.service}:{self.instance_type}"

    def price(self, spot: bool = False) -> float:
        """Price in USD per hour, on demand or spot (raises if the machine has no spot price)."""
        if not spot:
            return self.on_demand_usd_per_h
        if self.spot_usd_per_h is None:
            raise ValueError(f"{self.key} has no spot price")
        return self.spot_usd_per_h

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class AcceleratorSpec:
    """Vendor peak figures of one accelerator (dense, no sparsity), per device.

    The GPU kernel model (``advisor.probes.kernels``) also reads ``sm_count``,
    ``boost_clock_mhz``, ``l2_mib`` (MiB of L2 cache) and ``tdp_w`` (board power), with their
    source in ``kernel_source``; they are None where the row does not give them (TPUs).
    """

    name: str
    vendor: str
    generation: str
    fp32_tflops: float
    tf32_tflops: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    memory_gib: float
    memory_bandwidth_gbs: float
    link: str  # "PCIe", "NVLink", "ICI"
    link_gbs: float  # per-device intra-node bandwidth, GB/s, one direction
    source: str
    sm_count: int | None = None
    boost_clock_mhz: float | None = None
    l2_mib: float | None = None
    tdp_w: float | None = None
    kernel_source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
