"""The catalog's kernel-model records against the spec sheets the measured tables came with
(benchmarks/data/gpu-kernels/devices/*.json): equal where both describe the same thing, and
every difference one we know the reason for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.prediction.kernels import gpu_spec

DEVICES = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "gpu-kernels" / "devices"
# (GPU, field) -> why the records differ from the artefact's device file.
KNOWN = {
    ("NVIDIA H100 80GB HBM3", "Mem_Bw"): "data sheet 3.35 TB/s (SXM5); the file has 3430",
    ("NVIDIA L4", "Num_Sm"): "data sheet 30.3 TFLOPS at 2040 MHz = 58 SMs; the file has 60",
    ("NVIDIA L4", "SingleFLOPs"): "follows from the SM count (58 vs 60)",
    ("Tesla P4", "Num_Sm"): "GP104 has 20 SMs of 128 cores; the file counts 40 of 64",
    ("Tesla P4", "Freq"): "5.5 TFLOPS / 2560 cores = 1074 MHz boost; the file has 1113",
    ("Tesla P4", "SingleFLOPs"): "data sheet 5.5 TFLOPS; the file's 5.7 is 1113 MHz",
    ("Tesla P100-PCIE-16GB", "Freq"): "PCIe boost 1303 MHz (9.3 TFLOPS); the file's 1380 "
    "contradicts its own 9519 GFLOPS",
    ("Tesla V100-PCIE-32GB", "Freq"): "PCIe boost 1380 MHz (14 TFLOPS); the file has 1370",
}
FIELDS = {
    "Mem_Bw": ("memory_bandwidth_gbs", 0.01),
    "Num_Sm": ("sm_count", 0.0),
    "Freq": ("boost_clock_mhz", 0.0),
    "SingleFLOPs": ("fp32_tflops", 0.03),  # the file in GFLOP/s
    "L2Cache": ("l2_mib", 0.0),
}


@pytest.mark.parametrize("path", sorted(DEVICES.glob("*.json")), ids=lambda p: p.stem)
def test_records_agree_with_the_measured_device_files(path: Path) -> None:
    sheet = json.loads(path.read_text())
    spec = gpu_spec(sheet["Device"])
    for key, (field, tolerance) in FIELDS.items():
        ours = getattr(spec, field) * (1000 if key == "SingleFLOPs" else 1)
        agrees = abs(ours - sheet[key]) <= tolerance * sheet[key]
        known = (sheet["Device"], key) in KNOWN
        assert agrees != known, f"{sheet['Device']} {key}: ours {ours}, file {sheet[key]}"
