"""The published rows and the networks of ``benchmarks/multi_gpu.py`` (issue #47).

Rows: Lambda's PyTorch ResNet-50 fp32 rows (``data/gpu-throughput``) and TensorFlow's 2017
K80/P100 rows (``data/tf-benchmarks-2017``) of the models built here: ResNet-50 (the
repository's network), VGG-16 and AlexNet (torchvision's layouts, written out), and the small
workloads fcn and simple-cnn; each traced once per per-GPU batch on the meta device.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from advisor.providers.catalog import AcceleratorSpec, InstanceType

from advisor.prediction.step.traces import StepTrace
from advisor.prediction.timing import accel
from advisor.prediction.timing import constants as C
from advisor.prediction.timing.signature import WorkloadSignature
from advisor.prediction.timing.startup import device_startup

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cross_gpu import Specs
from lambda_rows import read_rows  # the benchmarks beside it

HERE = Path(__file__).resolve().parent / "data"
IMAGE = (3, 224, 224)


@dataclasses.dataclass(frozen=True)
class Row:
    """One published throughput: ``n`` devices of ``gpu`` on ``platform``."""

    data: str  # "lambda" or "tf2017"
    platform: str
    gpu: str
    n: int
    model: str
    batch: int  # per GPU
    throughput: float

    @property
    def framework(self) -> str:
        return "torch" if self.data == "lambda" else "keras"

    @property
    def machine_key(self) -> tuple[str, str, str, int]:
        return (self.data, self.platform, self.gpu, self.batch)


def tf_rows() -> list[Row]:
    """TensorFlow 2017 rows of the models built here."""
    out = []
    with (HERE / "tf-benchmarks-2017" / "train-images-per-s.csv").open() as fh:
        for r in csv.DictReader(fh):
            if r["model"] in BUILDERS:
                out.append(Row("tf2017", r["platform"], r["gpu"], int(r["gpus"]), r["model"],
                               int(r["batch_per_gpu"]), float(r["images_per_s"])))  # fmt: skip
    return out


def lambda_rows() -> list[Row]:
    data = HERE / "gpu-throughput"
    return [Row("lambda", "lambda", r.gpu, r.n, "resnet50", r.batch_per_gpu, r.throughput)
            for r in read_rows(data)]  # fmt: skip


# --- the networks -------------------------------------------------------------------------


def _vgg16() -> Any:
    from torch import nn

    layers: list[Any] = []
    c = 3
    for v in (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
              512, 512, 512, "M"):  # fmt: skip
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(c, int(v), 3, padding=1), nn.ReLU()]
            c = int(v)
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(512 * 49, 4096), nn.ReLU(),
                         nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000))  # fmt: skip


def _alexnet() -> Any:
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(), nn.Conv2d(384, 256, 3, padding=1),
        nn.ReLU(), nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Flatten(), nn.Linear(256 * 36, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
        nn.Linear(4096, 1000),
    )  # fmt: skip


def _resnet50() -> Any:
    from advisor.search_spaces.workloads.resnet50 import resnet50_torch

    return resnet50_torch(1000)


def _small(name: str) -> tuple[Callable[[], Any], tuple[int, ...], int]:
    if name == "fcn":
        from advisor.search_spaces.workloads.fcn import fcn_torch

        return fcn_torch, (1, 64, 64), 2
    from advisor.search_spaces.workloads.simple_cnn import simple_cnn_torch

    return simple_cnn_torch, (1, 28, 28), 10


BUILDERS: dict[str, tuple[Callable[[], Any], tuple[int, ...], int]] = {
    "resnet50": (_resnet50, IMAGE, 1000),
    "vgg16": (_vgg16, IMAGE, 1000),
    "alexnet": (_alexnet, IMAGE, 1000),
}
_TRACES: dict[tuple[str, int], StepTrace] = {}


def step(model: str, batch: int) -> StepTrace:
    """``model``'s training step at ``batch``, traced on the meta device (memoised)."""
    if (model, batch) not in _TRACES:
        import torch
        from advisor.probes.operators.torch_trace import trace_step

        build, shape, _classes = BUILDERS[model] if model in BUILDERS else _small(model)
        with torch.device("meta"):
            net = build()
            opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
            x, y = torch.empty((batch, *shape)), torch.zeros((batch,), dtype=torch.long)
        trace = trace_step(net, torch.nn.CrossEntropyLoss(), opt, x, y, workload=model,
                           batch_size=batch)  # fmt: skip
        _TRACES[model, batch] = StepTrace(trace, batch, "traced on the meta device")
    return _TRACES[model, batch]


def signature(s: StepTrace, model: str, framework: str) -> WorkloadSignature:
    t = s.trace
    shape = BUILDERS[model][1] if model in BUILDERS else _small(model)[1]
    return WorkloadSignature(
        workload=t.workload, framework=framework, batch_size=t.batch_size, threads=1,
        device="cpu", t2_s=1.0, t2_spread=1.0, t1_s=1.0, init_s=0.0, v1_s=None, v2_s=None,
        n_val=0, flops_per_sample=t.flops / t.batch_size, flops_counted=True,
        parameters=t.parameters, gradient_bytes=4.0 * t.parameters,
        input_bytes_per_sample=4.0 * math.prod(shape), data_s_per_sample=None,
    )  # fmt: skip


P100_NVLINK = (
    "P100 SXM2 datasheet (2016): 10.6 TFLOPS FP32, 732 GB/s HBM2; NVLink 160 GB/s "
    "bidirectional = 80 per direction (DGX-1)"
)


def machine_of(row: Row, specs: Specs) -> tuple[InstanceType, AcceleratorSpec]:
    """The machine a row ran on, with its topology (``providers.catalog.topology``)."""
    spec = specs.get(row.gpu)
    provider, itype = "owned", f"{row.n}x {row.gpu}"
    if row.platform == "aws":
        provider, itype = "aws", "p2.8xlarge"
    elif row.platform == "gce":
        provider, itype = "gcp", f"n1-standard-32+{row.n}xK80"
    elif row.platform == "dgx1":
        spec = dataclasses.replace(
            spec, link="NVLink", link_gbs=80.0, fp32_tflops=10.6, source=P100_NVLINK
        )
    m = InstanceType(provider, "ec2", itype, 8 * row.n, 64.0 * row.n, spec.name, row.n, 80.0,
                     1.0, None, "", "benchmark")  # fmt: skip
    return m, spec


def step_time(row: Row, specs: Specs, n: int, model: str | None = None) -> dict[str, float]:
    """The product's iteration parts for ``row``'s machine at ``n`` devices."""
    model = model or row.model
    m, spec = machine_of(dataclasses.replace(row, n=n), specs)
    s = step(model, row.batch)
    sig = signature(s, model, row.framework)
    profile = accel.generation_profile(spec)
    startup = device_startup(spec.name, profile, records=[])
    _, parts, _, _, _ = accel.predict_accelerator(sig, m, spec, row.batch * n, s, startup)
    parts["t2"] = accel.iteration_time(parts)
    return parts


@contextmanager
def constants(**values: Any) -> Iterator[None]:
    """The module constants, generation scales and whole-model profiles (``profile_<gen>``:
    (efficiency, memory_efficiency, sustained_clock), or None for the kernel model) set for
    one evaluation."""
    patches = []
    gens = dict(C.GENERATIONS)
    for name, value in values.items():
        if name.startswith("profile_"):
            g = name.removeprefix("profile_")
            if value is None:
                gens[g] = dataclasses.replace(gens[g], whole_model=False, efficiency=None,
                                              memory_efficiency=None, sustained_clock=1.0)  # fmt: skip
            else:
                eff, mem, clock = value
                gens[g] = dataclasses.replace(gens[g], whole_model=True, efficiency=eff,
                                              memory_efficiency=mem, sustained_clock=clock)  # fmt: skip
        elif name.startswith("scale_"):
            g = name.removeprefix("scale_")
            if hasattr(gens[g], "device_scale"):  # (the model before issue #47 has none)
                gens[g] = dataclasses.replace(gens[g], device_scale=value)
        elif hasattr(C, name):
            patches.append(mock.patch.object(C, name, value))
    patches.append(mock.patch.object(C, "GENERATIONS", gens))
    for p in patches:
        p.start()
    try:
        yield
    finally:
        for p in patches:
            p.stop()
