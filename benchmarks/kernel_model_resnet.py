"""ResNet-50 training throughput from its operator trace, against Lambda's measurements.

The network is this repository's ResNet-50 (``search_spaces/workloads/resnet50.py``, as in
``benchmarks/cross_gpu.py``) at 224x224 with 1000 classes and SGD with momentum, traced on the
meta device at each row's per-GPU batch. The step's device time is the kernel model's sum
over the forward, backward and optimizer operators; cuDNN convolutions run in TF32 on Ampere
and later (PyTorch's default, as in NVIDIA's containers). Predicted images/s = batch / step.
Nothing of these rows enters the kernel model's fit (unlike ``cross_gpu.py``, whose
efficiencies are fitted to them, leave one GPU out).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from advisor.probes.operators.types import OperatorTrace

from advisor.prediction.kernels import gpu_spec, operator_times
from advisor.prediction.kernels.gpus import GpuSpec

DATA = Path(__file__).resolve().parent / "data" / "gpu-throughput"
# cross_gpu.py's names for GPUs the catalog lists under another name.
ALIASES = {"A100 40GB PCIe": "A100-40GB-PCIe"}


@dataclass(frozen=True)
class ResnetRow:
    name: str
    gpu: str
    batch: int
    measured: float  # images/s
    predicted: float
    low: float
    high: float
    basis: str  # measured, chip or spec

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


def extra_gpus(data: Path = DATA) -> dict[str, GpuSpec]:
    """The benchmark's GPUs that the catalog does not sell (``gpus.csv``)."""
    from advisor.providers.catalog._csv import read_accelerators

    return {n: GpuSpec.from_accelerator(s) for n, s in read_accelerators(data / "gpus.csv").items()}


def resnet50_trace(batch: int) -> OperatorTrace:
    """One training step of ResNet-50 (224x224, 1000 classes, SGD momentum) on meta."""
    import torch
    from advisor.probes.operators.torch_trace import trace_step
    from advisor.search_spaces.workloads.resnet50 import resnet50_torch

    with torch.device("meta"):
        model = resnet50_torch(1000)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = torch.empty((batch, 3, 224, 224))
        y = torch.zeros((batch,), dtype=torch.long)
    return trace_step(model, torch.nn.CrossEntropyLoss(), optimizer, x, y,
                      workload="resnet50-224", batch_size=batch)  # fmt: skip


def predict(data: Path = DATA) -> list[ResnetRow]:
    """Every 1-GPU ResNet-50 row of the fp32 table, predicted from the trace."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from lambda_rows import read_rows

    extra = extra_gpus(data)
    traces: dict[int, OperatorTrace] = {}
    out = []
    for row in (r for r in read_rows(data) if r.n == 1):
        name = ALIASES.get(row.gpu, row.gpu)
        spec = extra[name] if name in extra else gpu_spec(name)
        trace = traces.setdefault(row.batch_per_gpu, resnet50_trace(row.batch_per_gpu))
        ops = list(trace.operators)
        times = operator_times(ops, [spec])
        counts = np.array([o.count for o in ops], dtype=float)
        step = float(counts @ times.value[:, 0])
        low, high = float(counts @ times.low[:, 0]), float(counts @ times.high[:, 0])
        b = row.batch_per_gpu
        how = "measured" if times.measured[:, 0].any() else "spec"
        how = "chip" if how == "spec" and times.same_chip[:, 0].any() else how
        out.append(ResnetRow(row.name, name, b, row.throughput, b / step, b / high, b / low, how))
    return out


def summary(rows: list[ResnetRow]) -> str:
    errors = [abs(r.error) for r in rows]
    return (
        f"median |error| {statistics.median(errors):.1%}, worst {max(errors):.1%} "
        f"({len(rows)} rows)"
    )
