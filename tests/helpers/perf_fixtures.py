"""Hand-built probe, machines and accelerator specs for the performance-model tests.

Accelerator figures are vendor peak specs per device (NVIDIA K80/V100/A100 data sheets, Google
Cloud TPU docs); the probe is a made-up but self-consistent small-CNN CPU probe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisor.probes.result import ProbeResult
from advisor.providers.catalog._types import AcceleratorSpec, InstanceType

SPECS = {  # the roofline fallback's figures (no kernel-model columns); GPUs: catalog()
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


# --- issue #26: operator traces for the GPU path ------------------------------------------------


def mlp_trace(batch: int, width: int = 1024, layers: int = 4, workload: str = "synthetic") -> Any:
    """A hand-built trace of a ``layers``-deep MLP step at ``batch``: per layer a forward
    product and ReLU, two gradient products and a ReLU backward; an SGD step as 3 multi-tensor
    launches. Shapes follow docs/operator-trace.md."""
    from advisor.probes.operators import Operator, OperatorTrace

    m, w = batch, width
    act = 4.0 * m * w
    dims = {"B": 1, "M": m, "N": w, "K": w}
    mm = 2.0 * m * w * w
    mm_bytes = 4.0 * (m * w + w * w + m * w)
    params = layers * w * w
    ops = (
        Operator("linear", "forward", "aten.mm", dims, flops=mm, bytes=mm_bytes, count=layers),
        Operator("elementwise", "forward", "aten.relu", {"numel": m * w}, op="relu",
                 flops=m * w, bytes=2 * act, count=layers),
        Operator("linear", "backward", "aten.mm", {"B": 1, "M": m, "N": w, "K": w},
                 op="data", flops=mm, bytes=mm_bytes, count=layers),
        Operator("linear", "backward", "aten.mm", {"B": 1, "M": w, "N": w, "K": m},
                 op="weight", flops=mm, bytes=mm_bytes, count=layers),
        Operator("elementwise", "backward", "aten.threshold_backward", {"numel": m * w},
                 op="relu", flops=m * w, bytes=3 * act, count=layers),
        Operator("optimizer", "optimizer", "aten._foreach_add_",
                 {"numel": params, "tensors": layers, "foreach": 1}, bytes=12.0 * params,
                 count=3),
    )  # fmt: skip
    return OperatorTrace(workload, "torch", batch, ops, executed=False, parameters=params)


class SyntheticTraces:
    """A ``TraceStore`` that answers every per-device batch with ``mlp_trace`` (so a test never
    traces a real workload), and remembers which keys were asked for."""

    def __init__(self, width: int = 1024, layers: int = 4) -> None:
        self.width, self.layers = width, layers
        self.asked: list[int] = []

    def get_trace(self, key: str) -> Any:
        batch = int(key.split("|")[3].removeprefix("b"))
        self.asked.append(batch)
        return mlp_trace(batch, self.width, self.layers)

    def put_trace(self, key: str, trace: Any) -> None:
        raise AssertionError("every trace is found in this store")


def traced_probe(
    batch: int = 512, width: int = 1024, layers: int = 4, t2: float = 0.35, **kw: Any
) -> ProbeResult:
    """``probe`` of the synthetic workload carrying ``mlp_trace`` at its batch, with a measured
    loader (``data_s``) and input size, as a probe made ready by ``prediction.step.ready`` is."""
    import dataclasses

    from advisor.probes.operators import with_operator_trace

    base = probe(batch=batch, t2=t2, workload="synthetic", parameters=layers * width * width, **kw)
    base = dataclasses.replace(
        base, fingerprint={"data_s": 1e-6 * batch, "input_bytes_per_sample": 4.0 * width}
    )
    return with_operator_trace(base, mlp_trace(batch, width, layers))


def catalog() -> Any:
    """The shipped catalog (its accelerator rows carry the kernel model's figures)."""
    from advisor.providers.catalog import load

    return load()


def with_synthetic_trace(p: ProbeResult, width: int = 2048, layers: int = 4) -> ProbeResult:
    """``p`` made ready for prediction without torch: ``mlp_trace`` as its operator trace (of
    its own workload and batch) and a loader time when it has none, so no trace is taken."""
    import dataclasses

    fp = {"data_s": 1e-6 * p.batch_size, **p.fingerprint}
    trace = mlp_trace(p.batch_size, width, layers, workload=p.workload)
    return dataclasses.replace(p, fingerprint=fp, operator_trace=trace.to_dict())


def probe_file(folder: Path, **kw: Any) -> Path:
    """``probe(**kw)`` ready for prediction (a 4 ms loader time and ``with_synthetic_trace``:
    no trace is taken, no torch import), written as ``folder/probe.json``."""
    import dataclasses

    p = with_synthetic_trace(dataclasses.replace(probe(**kw), fingerprint={"data_s": 0.004}))
    path = folder / "probe.json"
    path.write_text(p.to_json())
    return path


def stream_trace(batch: int, per_sample: int = 16384, kernels: int = 20, small: int = 40,
                 workload: str = "fcn") -> Any:  # fmt: skip
    """A memory-bound step: ``kernels`` element-wise kernels forward and backward over
    ``per_sample`` floats a sample, ``small`` tiny kernels (a per-step host cost), an SGD step;
    GPUs rank by memory bandwidth (A10G, then T4, then L4) and large batches amortise the
    launches."""
    from advisor.probes.operators import Operator, OperatorTrace

    n = batch * per_sample
    ops = (
        Operator("elementwise", "forward", "aten.relu", {"numel": n}, op="relu", flops=n,
                 bytes=8.0 * n, count=kernels),
        Operator("elementwise", "backward", "aten.threshold_backward", {"numel": n}, op="relu",
                 flops=n, bytes=12.0 * n, count=kernels),
        Operator("elementwise", "forward", "aten.add", {"numel": 64}, op="add", flops=64,
                 bytes=768, count=small),
        Operator("optimizer", "optimizer", "aten._foreach_add_",
                 {"numel": 100_000, "tensors": 4, "foreach": 1}, bytes=1.2e6, count=3),
    )  # fmt: skip
    return OperatorTrace(workload, "torch", batch, ops, executed=False, parameters=100_000)


def with_stream_trace(p: ProbeResult) -> ProbeResult:
    """``p`` made ready for prediction with ``stream_trace`` and a loader time."""
    import dataclasses

    fp = {"data_s": 1e-6 * p.batch_size, **p.fingerprint}
    trace = stream_trace(p.batch_size, workload=p.workload)
    return dataclasses.replace(p, fingerprint=fp, operator_trace=trace.to_dict())
