"""Lambda's published ResNet-50 training throughputs (``benchmarks/data/gpu-throughput``):
the rows, the GPU each measured, and the per-GPU batch from the batch file. Shared by
``cross_gpu.py`` and ``kernel_model_resnet.py``."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

# Row name fragment -> catalog accelerator (cloud GPUs) or a row of gpus.csv.
ROW_GPUS = {
    "Quadro RTX 8000": "Quadro RTX 8000",
    "V100 16GB": "V100",
    "RTX 3090": "RTX 3090",
    "A10": "A10",
    "A100 40GB PCIe": "A100-40GB-PCIe",
    "A100 80GB PCIe": "A100-80GB-PCIe",
    "A100 80GB SXM4": "A100-80GB",
    "RTX 6000 Ada": "RTX 6000 Ada",
    "Ada A6000": "RTX 6000 Ada",
    "RTX A6000": "RTX A6000",
    "RTX 4090": "RTX 4090",
    "H100 80GB PCIe": "H100 80GB PCIe",
    "H100 80GB SXM5": "H100",
}
DEFAULT_BATCH_PER_GPU = 256  # rows the batch file does not list


@dataclasses.dataclass(frozen=True)
class Row:
    """One published measurement: ``n`` GPUs of ``gpu``, images/s for the whole machine."""

    name: str
    gpu: str
    n: int
    throughput: float
    batch_per_gpu: int


def gpu_of(name: str) -> str | None:
    """The accelerator a data row measured (longest matching fragment), None if unknown."""
    for fragment in sorted(ROW_GPUS, key=len, reverse=True):
        if fragment in name:
            return ROW_GPUS[fragment]
    return None


def read_rows(data: Path, model: str = "resnet50") -> list[Row]:
    """The fp32 rows of ``model`` with their per-GPU batch (0 throughputs dropped)."""
    with (data / "train-batch-fp32.csv").open() as fh:
        batches = {
            (gpu_of(r["name_gpu"]), int(float(r["num_gpu"]))): int(r[model])
            for r in csv.DictReader(fh)
        }
    rows = []
    with (data / "train-throughput-fp32.csv").open() as fh:
        for r in csv.DictReader(fh):
            gpu, n, thr = gpu_of(r["name_gpu"]), int(float(r["num_gpu"])), float(r[model])
            if gpu is None or thr <= 0:
                continue
            batch = batches.get((gpu, n))
            per_gpu = batch // n if batch else DEFAULT_BATCH_PER_GPU
            rows.append(Row(r["name_gpu"], gpu, n, thr, per_gpu))
    return rows
