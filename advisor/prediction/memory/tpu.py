"""A TPU's memory per data-parallel device (issue #47): HBM per core, and XLA's own buffers.

A Cloud TPU slice runs one replica per *device* XLA exposes: a TensorCore on v2 and v3 (two
per chip, each with its own half of the chip's HBM), one chip on v4 (its two TensorCores fused
as one "megacore" device), v5e and v6e (one TensorCore per chip). The catalog counts chips
(``v3-8`` is 4 chips, 8 cores); the memory model checks one device's step against that
device's HBM. Sources, per generation (Google Cloud TPU documentation, "TPU v2" ... "TPU
v6e" pages and "TPU architecture"):

- v2: 2 TensorCores per chip, 16 GiB HBM per chip -> 8 GiB per core;
- v3: 2 TensorCores per chip, 32 GiB HBM2 per chip -> 16 GiB per core;
- v4: 2 TensorCores per chip as one megacore device, 32 GiB HBM2 per chip;
- v5e: 1 TensorCore per chip, 16 GiB HBM2 per chip;
- v6e: 1 TensorCore per chip, 32 GiB HBM per chip.

Beyond the step's tensors, two priors (no TPU measured here, ``prior=True``):

- ``xla_runtime``: the compiled program, its constants and the runtime's reserved HBM:
  0.5 GiB (0.25-1.5) per device;
- ``tile_padding``: XLA lays arrays out in (8, 128) tiles on a TPU, padding the last two
  dimensions (Cloud TPU performance guide, "tensor dimensions" / padding): 10 % (0-50 %) of the
  tensors' peak; a model with thin layers (few channels) pads far more, hence the wide top.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.prediction.memory.model import GIB, MemoryTerm


@dataclass(frozen=True)
class TpuDevices:
    """One TPU generation's data-parallel devices per chip and HBM per device."""

    per_chip: int
    hbm_gib: float
    source: str


_DOCS = "Google Cloud TPU documentation"
TPU_DEVICES: dict[str, TpuDevices] = {
    "TPU-v2": TpuDevices(2, 8.0, f"{_DOCS}, TPU v2: 2 TensorCores per chip, 16 GiB HBM per chip"),
    "TPU-v3": TpuDevices(2, 16.0, f"{_DOCS}, TPU v3: 2 TensorCores per chip, 32 GiB HBM2 per chip"),
    "TPU-v4": TpuDevices(
        1, 32.0, f"{_DOCS}, TPU v4: 2 TensorCores per chip as one megacore device, 32 GiB HBM2"
    ),
    "TPU-v5e": TpuDevices(1, 16.0, f"{_DOCS}, TPU v5e: 1 TensorCore per chip, 16 GiB HBM2"),
    "TPU-v6e": TpuDevices(1, 32.0, f"{_DOCS}, TPU v6e: 1 TensorCore per chip, 32 GiB HBM"),
}
XLA_RUNTIME_GIB = (0.5, 0.25, 1.5)
TILE_PADDING = (0.10, 0.0, 0.5)


def is_tpu(accelerator: str | None) -> bool:
    """Whether the catalog's accelerator name is a TPU."""
    return (accelerator or "").upper().startswith("TPU")


def tpu_devices(accelerator: str, chips: int, memory_gib: float) -> tuple[int, float, str]:
    """Data-parallel devices, HBM GiB per device and its source for ``chips`` chips of
    ``accelerator`` (a generation not listed: one device per chip with the chip's memory)."""
    found = TPU_DEVICES.get(accelerator)
    if found is None:
        return chips, memory_gib, "prior: one device per chip, the catalog's memory per chip"
    return chips * found.per_chip, found.hbm_gib, found.source


def xla_terms(tensor_bytes: float) -> list[MemoryTerm]:
    """XLA's own HBM beyond the step's tensors (priors)."""
    v, lo, hi = XLA_RUNTIME_GIB
    p, plo, phi = TILE_PADDING
    return [
        MemoryTerm("xla_runtime", v * GIB, lo * GIB, hi * GIB,
                   f"prior: XLA program, constants and runtime reserve, {v:g} ({lo:g}-{hi:g}) "
                   "GiB per TPU device", prior=True),
        MemoryTerm("tile_padding", p * tensor_bytes, plo * tensor_bytes, phi * tensor_bytes,
                   f"prior: XLA's (8, 128) tile layout pads arrays, {p:.0%} ({plo:.0%}-"
                   f"{phi:.0%}) of the tensors' peak", prior=True),
    ]  # fmt: skip
