"""Issue #34: hand-built steps with memory terms far from any GPU's edge, for the memory
paths' tests: 4 GiB of parameters, as much in gradients, 3 GiB of saved activations per
sample. At batch 8 a step needs about 32 GiB per device: more than a 16 GB V100 or T4 and a
24 GB L4, less than a 40 GB A100 or an 80 GB H100; at one sample per device about 11 GiB."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from advisor.probes.operators import with_operator_trace
from advisor.probes.result import ProbeResult
from perf_fixtures import gpu_machine, mlp_trace, probe

from advisor.prediction.memo import forget_all
from advisor.prediction.memory.model import GIB
from advisor.prediction.step import traces

MODEL = "trace_user_models:build_wide_linear"  # importable, never built here
# Batch 8 fits a 40 GB A100 at its upper estimate (30 GiB of tensors plus the priors, cuBLAS's
# workspaces and the trace's measured margin), batch 16 does not, nor batch 8 a 16 GB V100.
REPLICA, PER_SAMPLE = 4 * GIB, 2.75 * GIB


def sized(batch: int, workload: str = MODEL) -> Any:
    """The hand-built step at ``batch`` with this file's memory terms."""
    t = mlp_trace(batch, 256, 2, workload=workload)
    memory = {"parameters": REPLICA, "gradients": REPLICA, "optimizer_state": 0,
              "activations": PER_SAMPLE * batch}  # fmt: skip
    return dataclasses.replace(t, memory_bytes=memory)


def sized_probe(batch: int, workload: str = MODEL, t2: float = 0.35) -> ProbeResult:
    base = probe(batch=batch, t2=t2, workload=workload)
    fp = {"data_s": 1e-6 * batch, "input_bytes_per_sample": 1024.0}
    return with_operator_trace(dataclasses.replace(base, fingerprint=fp), sized(batch, workload))


class Store:
    """A trace store answering every batch with ``sized`` and remembering what was asked."""

    def __init__(self, workload: str = MODEL) -> None:
        self.workload, self.asked = workload, []  # type: ignore[var-annotated]

    def get_trace(self, key: str) -> Any:
        batch = int(key.split("|")[3].removeprefix("b"))
        self.asked.append(batch)
        return sized(batch, self.workload)

    def put_trace(self, key: str, trace: Any) -> None:
        raise AssertionError("every trace is in this store")


def remember(*batches: int, workload: str = MODEL) -> None:
    """The steps at ``batches`` known to this process (as a trace taken earlier would be)."""
    for b in batches:
        traces.remember(traces.trace_key(workload, "torch", b, {}), sized(b, workload))


def wide(batch: int) -> Any:
    """A 4-layer MLP 4,096 wide at ``batch`` (its kernels compute-bound on any GPU, so the
    GPUs' speeds tell the rows apart) holding this file's memory terms."""
    return dataclasses.replace(
        mlp_trace(batch, 4096, 4, workload=MODEL), memory_bytes=sized(batch).memory_bytes
    )


def wide_probe(batch: int) -> ProbeResult:
    """A local probe of ``wide``'s step at ``batch``."""
    base = dataclasses.replace(probe(batch=batch, t2=2.0, workload=MODEL),
                               fingerprint={"data_s": 1e-6 * batch,
                                            "input_bytes_per_sample": 1024.0})  # fmt: skip
    return with_operator_trace(base, wide(batch))


def wide_study(tmp_path: Any, batch: int, machines: list[str]) -> tuple[str, Any, Any]:
    """(storage URL, space, ``LocalBackend``) of a study of ``wide``'s step at ``batch`` on
    ``machines``, its steps at the micro-batches up to ``batch`` known to this process (never
    traced for real) and its local probes ``wide_probe``."""
    from advisor.search_spaces.loader import load_space

    from advisor.evaluation.local import LocalBackend

    b = 1
    while b <= batch:
        traces.remember(traces.trace_key(MODEL, "torch", b, {}), wide(b))
        b *= 2
    url = f"sqlite:///{tmp_path / 'study.db'}"
    space = load_space(f"workload: {MODEL}\nbatch_sizes: [{batch}]\nmachines:\n  "
                       f"instance_types: [{', '.join(machines)}]\n", MODEL)  # fmt: skip
    return url, space, LocalBackend(url, run_probe=lambda r: wide_probe(r.batch_size))


A100 = gpu_machine("a100.1", "A100", 1, 4.0)
V100 = gpu_machine("v100.1", "V100", 1, 0.5)  # the cheapest by far, and too small
V100X8 = gpu_machine("v100.8", "V100", 8, 24.0)


def sized_lines(workload: str, plan: Any, *_: Any, **__: Any) -> Any:
    """The plan's traced peak (``plan_peak.peak_lines``) of ``sized``'s step: the replica's
    parameters and gradients and ``PER_SAMPLE`` of activations a sample, whatever the plan (a
    stand-in for tracing ``MODEL``, which is never built here); any other workload cannot be
    traced here."""
    from advisor.probes.operators.peak_lines import PeakLines

    if workload != MODEL:
        raise ModuleNotFoundError(f"no module named {workload.partition(':')[0]!r}")
    at = [(REPLICA, 0, REPLICA, 0, PER_SAMPLE * b, 0, 0) for b in (2, 4)]
    return PeakLines(2, 4, ((at[0], at[1]),), 0, ("sized's step",))


@pytest.fixture(autouse=True)
def fresh_memos(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The memos of traces and device memory forgotten before and after a test, the plan
    tracer answering with ``sized_lines`` and no shipped trace read (assign it in a test
    module to use it there)."""
    from advisor.probes.operators import plan_peak

    from advisor.prediction.step import shipped

    monkeypatch.setattr(plan_peak, "peak_lines", sized_lines)
    forget_all()
    with shipped.unread():  # these steps stand for fcn's: its shipped traces are not read
        yield
    forget_all()


def expected_bytes(batch: int, machine: Any, catalog: Any, high: bool = False) -> float:
    """What one GPU of ``machine`` needs for ``sized``'s step at ``batch`` per GPU, by the
    memory model's own terms: the traced tensors plus the GPU's priors (``high``: the upper
    estimate)."""
    from advisor.prediction.memory.model import prior_terms

    tensors = 2 * REPLICA + PER_SAMPLE * batch
    spec = catalog.accelerator(machine.accelerator)
    terms = prior_terms(  # an MLP's step: cuBLAS's workspaces too
        "torch", False, tensors, spec.generation, machine.accelerator_count, multiplies=True
    )
    return tensors + sum(t.high if high else t.value for t in terms)
