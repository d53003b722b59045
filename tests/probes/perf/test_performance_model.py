"""Qualitative behaviour of the cross-device performance model (issue 5)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from advisor.probes.iteration_model import phase_times
from advisor.probes.perf.calibration import calibration_factor, record_measurement
from advisor.probes.perf.cpu import fit_parallel_fraction, local_cpu
from advisor.probes.perf.model import (
    calibrate_from,
    predict,
    predict_phases,
    predict_phases_for_batch,
)
from advisor.probes.result import ProbeResult
from perf_fixtures import (
    LOCAL,
    SPECS,
    FakeCatalog,
    cpu_machine,
    gpu_machine,
    probe,
)

from advisor.errors import AdvisorError

CAT = FakeCatalog()


def t2(p: ProbeResult, machine: object, batch: int | None = None, **kw: object) -> float:
    return predict(p, machine, CAT, batch, **kw).phases.t2.value  # type: ignore[arg-type]


def on_device(p: ProbeResult) -> ProbeResult:
    """The same probe with its data already on the device (no host input pipeline)."""
    fp = {**p.fingerprint, "data_s": 0.0, "input_bytes_per_sample": 0.0}
    return dataclasses.replace(p, fingerprint=fp)


@pytest.mark.parametrize("strategy", ["dp", "ddp"])
@pytest.mark.parametrize(("accel", "counts"), [("K80", (2, 8, 16)), ("V100", (4, 8))])
def test_more_gpus_never_help_below_saturation(
    strategy: str, accel: str, counts: tuple[int, ...]
) -> None:
    small = on_device(probe(flops_per_sample=2e6, parameters=50_000))
    batch = 64
    one = predict(small, gpu_machine("one", accel, 1, 1.0), CAT, batch, strategy=strategy)
    assert one.breakdown["saturation_batch"] > batch  # precondition: below saturation
    for n in counts:
        many = t2(small, gpu_machine(f"x{n}", accel, n, n), batch, strategy=strategy)
        assert many >= one.phases.t2.value, (n, many, one.phases.t2.value)


def test_larger_global_batches_amortise_the_allreduce() -> None:
    big = on_device(probe(flops_per_sample=2e8, parameters=5_000_000))
    one, eight = gpu_machine("p3.2xlarge", "V100", 1, 3.06), gpu_machine("p3.16", "V100", 8, 24)
    speedups, shares = [], []
    for batch in (64, 256, 1024, 4096):
        pred = predict(big, eight, CAT, batch)
        speedups.append(t2(big, one, batch) / pred.phases.t2.value)
        shares.append(pred.breakdown["allreduce"] / pred.phases.t2.value)
    assert speedups == sorted(speedups) and speedups[-1] > speedups[0]
    assert shares == sorted(shares, reverse=True)
    assert speedups[0] < 1.5 < speedups[-1]


def test_faster_accelerator_never_slower_when_compute_bound() -> None:
    heavy = probe(flops_per_sample=5e9, parameters=1_000_000, batch=256)
    base = SPECS["V100"]
    times = []
    for tflops in (4.0, 8.0, 15.7, 30.0, 60.0):
        spec = dataclasses.replace(base, name=f"V100-{tflops}", fp32_tflops=tflops)
        cat = type("Cat", (), {"accelerator": lambda self, name, s=spec: s})()
        m = gpu_machine("x", spec.name, 1, 1.0)
        times.append(predict(heavy, m, cat).phases.t2.value)
    assert times == sorted(times, reverse=True)
    assert times[0] > times[-1]


def test_k80_slower_than_v100_slower_than_a100_for_compute_bound_workload() -> None:
    heavy = probe(flops_per_sample=5e9, batch=256)
    k80, v100, a100 = (t2(heavy, gpu_machine(a, a, 1, 1.0)) for a in ("K80", "V100", "A100"))
    assert k80 > v100 > a100
    # Few activation bytes per FLOP (a matmul-heavy model): the device's compute term limits.
    dense = dataclasses.replace(heavy, fingerprint={"activation_bytes_per_sample": 1e6})
    pred = predict(dense, gpu_machine("p3", "V100", 1, 3.06), CAT)
    assert pred.bottleneck == "compute"
    # At the prior 20 FLOP/byte (conv nets like ResNet-50 run ~40), memory traffic limits:
    # the published GPU throughputs fitted in benchmarks/cross_gpu.py say so.
    assert predict(heavy, gpu_machine("p3", "V100", 1, 3.06), CAT).bottleneck == "memory"


def test_k80_board_figures_are_split_per_gk210() -> None:
    board = dataclasses.replace(SPECS["K80"], fp32_tflops=8.73, memory_bandwidth_gbs=480)
    cat = type("Cat", (), {"accelerator": lambda self, name: board})()
    m = gpu_machine("p2.xlarge", "K80", 1, 0.9)
    heavy = probe(flops_per_sample=5e9)
    assert predict(heavy, m, cat).phases.t2.value == pytest.approx(t2(heavy, m), rel=0.02)


def test_intervals_contain_the_point_and_widen_from_cpu_to_gpu_to_tpu() -> None:
    p = probe()
    widths = {}
    for name, machine in {
        "same-cpu": LOCAL,
        "cpu": cpu_machine("c5.4xlarge", 16),
        "gpu": gpu_machine("p3.2xlarge", "V100", 1, 3.06),
        "tpu": gpu_machine("v3-8", "TPU v3", 8, 8.0),
    }.items():
        pred = predict(p, machine, CAT, 256)  # 256 != probe batch: local is modelled too
        assert pred.kind == name
        assert pred.source == "modelled"
        for phase in ("init", "t1", "t2", "v1", "v2"):
            iv = getattr(pred.phases, phase)
            assert iv.low <= iv.value <= iv.high
        widths[name] = pred.phases.t2.high / pred.phases.t2.low
    assert widths["same-cpu"] < widths["cpu"] < widths["gpu"] < widths["tpu"]


def test_first_iteration_and_init_on_gpus_are_wide_priors() -> None:
    p = probe()
    pred = predict(p, gpu_machine("p3.8xlarge", "V100", 4, 12.24), CAT)
    assert pred.phases.t1.high / pred.phases.t1.low >= 4
    assert pred.phases.init.value > p.init_s  # CUDA context and NCCL set-up added
    assert "prior" in pred.phases.note


def test_measurement_wins_on_the_local_machine() -> None:
    p = probe()
    measured = predict_phases(p, LOCAL, CAT)
    assert measured.source == "measured"
    assert measured == phase_times(p)
    other_batch = predict_phases_for_batch(p, LOCAL, CAT, 1024)
    assert other_batch.source == "modelled"
    assert 1.5 * measured.t2.value < other_batch.t2.value < 2.1 * measured.t2.value
    more_threads = predict(p, LOCAL, CAT, threads=4).phases
    assert more_threads.source == "modelled" and more_threads.t2.value < measured.t2.value


def test_batch_scaling_keeps_fixed_overheads() -> None:
    p = probe()
    m = gpu_machine("p3.2xlarge", "V100", 1, 3.06)
    small, large = t2(p, m, 64), t2(p, m, 128)
    assert small < large < 2 * small


def test_cpu_threads_follow_amdahl_and_the_fraction_can_be_fitted() -> None:
    p = probe(threads=1)
    m = cpu_machine("local", 16, provider="local")
    times = [t2(p, m, threads=n) for n in (1, 2, 4, 8, 16)]
    assert times == sorted(times, reverse=True)
    assert times[0] / times[-1] < 16
    a = t2(p, m, threads=2, parallel_fraction=0.8)
    assert fit_parallel_fraction(p.iteration_s[1], 1, a, 2) == pytest.approx(0.8, abs=0.05)


def test_cloud_cpu_uses_physical_cores_and_vendor_clock() -> None:
    p = probe(threads=2)
    local = local_cpu("flags : fpu avx2 fma\ncpu MHz : 3400.0\n")
    c5_small = predict(p, cpu_machine("c5.large", 2), CAT)  # 1 physical core
    c5_big = predict(p, cpu_machine("c5.4xlarge", 16), CAT)  # 8 physical cores
    assert c5_small.breakdown["threads"] == 1 and c5_big.breakdown["threads"] == 8
    assert c5_big.phases.t2.value < c5_small.phases.t2.value
    assert local.flops_per_cycle == 32 and local.ghz == pytest.approx(3.4)


def test_calibration_factor_is_applied_and_narrows_the_interval() -> None:
    p = probe()
    m = gpu_machine("p3.2xlarge", "V100", 1, 3.06)
    before = predict(p, m, CAT)
    for ratio in (1.9, 2.1):
        record_measurement("fcn", 512, m.key, "V100", 0.01, 0.01 * ratio)
    cal = calibration_factor("V100", "fcn")
    assert cal.points == 2 and cal.factor == pytest.approx(math.sqrt(1.9 * 2.1))
    after = predict(p, m, CAT)
    assert after.phases.t2.value == pytest.approx(before.phases.t2.value * cal.factor)
    assert after.calibration_points == 2
    width = lambda iv: iv.high / iv.low  # noqa: E731
    assert width(after.phases.t2) < width(before.phases.t2)
    assert calibration_factor("K80").points == 0  # other device classes untouched


def test_calibrate_from_a_remote_probe_records_both_sides() -> None:
    p = probe()
    m = gpu_machine("p3.2xlarge", "V100", 1, 3.06)
    predicted = t2(p, m)
    remote = dataclasses.replace(p, device="cuda", iteration_s=(1.0, *(predicted * 1.5,) * 5))
    ratio = calibrate_from(p, remote, m, CAT)
    assert ratio == pytest.approx(1.5)
    assert t2(p, m) == pytest.approx(predicted * 1.5)


def test_failed_probe_is_a_user_error() -> None:
    failed = ProbeResult("fcn", "torch", 512, "cpu", 2, status="oom", error="out of memory")
    with pytest.raises(AdvisorError, match="failed"):
        predict(failed, LOCAL, CAT)


def test_missing_flop_count_widens_the_gpu_interval() -> None:
    counted, guessed = probe(), probe(flops_per_sample=None)
    m = gpu_machine("p3.2xlarge", "V100", 1, 3.06)
    w = [predict(x, m, CAT).phases.t2 for x in (counted, guessed)]
    assert w[1].high / w[1].low > w[0].high / w[0].low


@pytest.mark.slow
def test_trace_counts_ops_and_activation_bytes_of_a_real_step() -> None:
    from advisor.probes.perf.trace import trace_torch_step, with_trace

    trace = trace_torch_step("fcn", 64, loader_batches=2)
    assert 20 <= trace["ops_per_iteration"] <= 1000
    assert trace["activation_bytes_per_sample"] > 4 * 64 * 64  # more than the input itself
    assert trace["data_s"] > 0
    traced = with_trace(probe(), trace)
    m = gpu_machine("p3.2xlarge", "V100", 1, 3.06)
    pred = predict(traced, m, CAT)
    assert pred.breakdown["dispatch"] == pytest.approx(trace["ops_per_iteration"] * 30e-6)
