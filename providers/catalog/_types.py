"""Typed rows of the instance catalog."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from advisor.providers import registry

PROVIDERS = (*registry.catalog_providers(), registry.LOCAL, registry.OWNED)
SERVICES = registry.services()
# Issue #27: how a price was obtained -- read out from a named price list, an estimate (best
# knowledge, or derived from a read-out by a stated rule), or given by the user (this machine).
PRICE_BASES = ("read-out", "estimate", "given", "owned")  # owned: amortisation + energy
# Whether the type is still offered as current, a previous generation, or retired by its
# provider (as of the snapshot's date; the source column says whose notice).
LIFECYCLES = ("current", "previous-generation", "retired")


@dataclass(frozen=True)
class InstanceType:
    """One purchasable machine type with its list prices (USD per hour).

    ``accelerator`` is None for CPU-only machines; ``spot_usd_per_h`` is None where the
    service sells no spot/preemptible capacity. ``source`` says where the price was read,
    or that it is best knowledge rather than a read-out; ``price_basis`` (on demand) and
    ``spot_basis`` say which (``PRICE_BASES``; derived from ``source`` when not given) and
    ``lifecycle`` whether the provider still offers the type as current (``LIFECYCLES``).
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
    price_basis: str = ""
    spot_basis: str = ""
    lifecycle: str = "current"

    def __post_init__(self) -> None:
        if not self.price_basis:
            object.__setattr__(self, "price_basis", basis_of(self.provider, self.source))
        if not self.spot_basis and self.spot_usd_per_h is not None:
            object.__setattr__(self, "spot_basis", self.price_basis)
        for name in ("price_basis", "spot_basis"):
            value = getattr(self, name)
            if value not in PRICE_BASES and (name == "price_basis" or value):
                raise ValueError(f"{name} must be one of {PRICE_BASES}, got {value!r}")
        if self.lifecycle not in LIFECYCLES:
            raise ValueError(f"lifecycle must be one of {LIFECYCLES}, got {self.lifecycle!r}")
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

    def basis(self, spot: bool = False) -> str:
        """How the price used (on demand or spot) was obtained: ``PRICE_BASES``."""
        return self.spot_basis if spot else self.price_basis

    @property
    def current(self) -> bool:
        """Whether the provider still offers this type as a current generation."""
        return self.lifecycle == "current"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def basis_of(provider: str, source: str) -> str:
    """A price's basis from its source text (rows written before the column existed): a
    ``read-out: ...`` is a read-out, this machine's price is given, the rest (best knowledge,
    modelled, literature) an estimate."""
    if provider == "local":
        return "given"
    return "read-out" if source.strip().lower().startswith("read-out") else "estimate"


@dataclass(frozen=True)
class AcceleratorSpec:
    """Vendor peak figures of one accelerator (dense, no sparsity), per device.

    The GPU kernel model (``advisor.prediction.kernels``) also reads ``sm_count``,
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
