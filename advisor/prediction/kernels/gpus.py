"""The GPU figures the kernel model reads: a ``GpuSpec`` per accelerator of the catalog.

Every figure comes from the catalog's ``accelerators.csv`` (vendor data sheets, each row with
its source text); the kernel model needs the peak FLOP/s per precision, the memory bandwidth
and the SM count. ``DATA_DEVICE_NAMES`` maps the device names of the measured kernel tables
(``torch.cuda.get_device_name()``) to catalog names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisor.errors import AdvisorError

# Device names in the measured kernel tables -> accelerators.csv names.
DATA_DEVICE_NAMES = {
    "Tesla P4": "P4",
    "Tesla P100-PCIE-16GB": "P100",
    "Tesla T4": "T4",
    "Tesla V100-PCIE-32GB": "V100-PCIe-32GB",
    "NVIDIA A100-PCIE-40GB": "A100-40GB-PCIe",
    "NVIDIA A100 80GB PCIe": "A100-80GB-PCIe",
    "NVIDIA A100-SXM4-40GB": "A100-40GB",
    "NVIDIA H100 80GB HBM3": "H100",
    "NVIDIA L4": "L4",
}
# Catalog GPUs that are the same board as a measured one (same chip, clocks and memory
# system; only the memory size differs), so they use its measurements.
SAME_BOARD = {"V100-PCIe": "V100-PCIe-32GB"}
# GPUs whose chip was measured on another board (other clocks, power or memory, which their
# own spec figures carry): they take the measured chip's level with the spec-only interval.
SAME_CHIP = {
    "V100": "V100-PCIe-32GB",
    "V100-32GB": "V100-PCIe-32GB",
    "A100-40GB": "A100-40GB-PCIe",
    "A100-80GB": "A100-40GB-PCIe",
    "A100-80GB-PCIe": "A100-40GB-PCIe",
}


@dataclass(frozen=True)
class GpuSpec:
    """Per-device figures of one GPU (dense peaks, no sparsity).

    ``tf32_tflops``/``fp16_tflops``/``bf16_tflops`` are None where the GPU has no tensor
    cores for that type. ``sm_count`` and ``boost_clock_mhz`` are from the vendor's sheet.
    """

    name: str
    fp32_tflops: float
    tf32_tflops: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    memory_bandwidth_gbs: float
    sm_count: int
    boost_clock_mhz: float
    l2_mib: float
    source: str = ""

    def __post_init__(self) -> None:
        for field_name in ("fp32_tflops", "memory_bandwidth_gbs", "boost_clock_mhz"):
            if not getattr(self, field_name) > 0:
                raise ValueError(f"{field_name} must be > 0, but got {getattr(self, field_name)}")
        if self.sm_count < 1 or self.l2_mib < 0:
            raise ValueError(
                f"sm_count must be >= 1 and l2_mib >= 0, but got {self.sm_count}, {self.l2_mib}"
            )

    def peak_tflops(self, dtype: str, tensor_cores: bool) -> float:
        """Dense peak TFLOP/s for ``dtype``; ``tensor_cores`` says whether the library may use
        them for float32 (TF32: cuDNN convolutions by default, matmul only when allowed)."""
        if dtype in ("bfloat16", "bf16"):
            return self.bf16_tflops or self.fp16_tflops or self.fp32_tflops
        if dtype in ("float16", "fp16", "half"):
            return self.fp16_tflops or self.fp32_tflops
        if tensor_cores and self.tf32_tflops:
            return self.tf32_tflops
        return self.fp32_tflops

    @classmethod
    def from_accelerator(cls, spec: Any) -> GpuSpec:
        """The kernel model's figures of a catalog ``AcceleratorSpec``; an AdvisorError
        naming the missing column when the row lacks them (TPUs, CPU)."""
        missing = [
            c for c in ("sm_count", "boost_clock_mhz", "l2_mib") if getattr(spec, c, None) is None
        ]
        if missing or getattr(spec, "vendor", "NVIDIA").upper() != "NVIDIA":
            raise AdvisorError(
                f"accelerator {spec.name!r} has no kernel-model figures "
                f"({', '.join(missing) or 'not an NVIDIA GPU'}).",
                "add sm_count, boost_clock_mhz and l2_mib to its accelerators.csv row, with "
                "their source in kernel_source.",
            )
        return cls(
            name=spec.name,
            fp32_tflops=spec.fp32_tflops,
            tf32_tflops=spec.tf32_tflops,
            fp16_tflops=spec.fp16_tflops,
            bf16_tflops=spec.bf16_tflops,
            memory_bandwidth_gbs=spec.memory_bandwidth_gbs,
            sm_count=int(spec.sm_count),
            boost_clock_mhz=float(spec.boost_clock_mhz),
            l2_mib=float(spec.l2_mib),
            source=getattr(spec, "kernel_source", "") or spec.source,
        )


def catalog_gpus() -> dict[str, GpuSpec]:
    """Every catalog accelerator that has kernel-model figures, by catalog name."""
    from advisor.providers.catalog import load

    out = {}
    for name, spec in load().accelerators.items():
        if getattr(spec, "sm_count", None) is not None and spec.vendor.upper() == "NVIDIA":
            out[name] = GpuSpec.from_accelerator(spec)
    return out


def gpu_spec(gpu: str | GpuSpec | Any) -> GpuSpec:
    """A ``GpuSpec`` from a catalog name (``H100``), a device name of the measured tables
    (``NVIDIA H100 80GB HBM3``), an ``AcceleratorSpec`` or a ``GpuSpec``."""
    if isinstance(gpu, GpuSpec):
        return gpu
    if not isinstance(gpu, str):
        return GpuSpec.from_accelerator(gpu)
    name = DATA_DEVICE_NAMES.get(gpu, gpu)
    gpus = catalog_gpus()
    if name in gpus:
        return gpus[name]
    lowered = {k.lower(): v for k, v in gpus.items()}
    if name.lower() in lowered:
        return lowered[name.lower()]
    raise AdvisorError(
        f"Unknown GPU {gpu!r} for the kernel model.",
        f"use one of: {', '.join(sorted(gpus))}.",
    )


def measured_name(gpu: GpuSpec) -> str:
    """The catalog name whose kernels were measured for ``gpu`` (itself or the same board)."""
    return SAME_BOARD.get(gpu.name, gpu.name)


def chip_name(gpu: GpuSpec) -> str:
    """The measured GPU of the same chip on another board, or "" if none."""
    return SAME_CHIP.get(gpu.name, "")
