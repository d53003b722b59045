"""The memory model's formulas (issue #34): terms from a trace's peak, the GPU's priors by
framework and generation, the fit and its texts, the largest batch that fits."""

from __future__ import annotations

import pytest
from advisor.probes.operators.peak_memory import split_peak
from advisor.probes.operators.types import Operator, OperatorTrace

from advisor.prediction.memory.model import (
    GIB,
    MIB,
    MemoryFit,
    MemoryTerm,
    StepMemory,
    largest_fitting_batch,
    memory_fit,
    step_memory,
    untraceable,
)
from advisor.prediction.memory.priors import FIXED_GIB, GENERIC_FIXED_GIB, RESERVE_FRACTION

PEAK = {
    "parameters": 400 * MIB,
    "gradients": 300 * MIB,
    "optimizer_state": 800 * MIB,
    "activations": 1000 * MIB,
    "backward_temporaries": 50 * MIB,
    "optimizer_temporaries": 0,
    "batch": 2 * MIB,
}
SUM = {"parameters": 1, "gradients": 2, "optimizer_state": 3, "activations": 4}


def _trace(framework: str = "torch", conv: bool = False, **memory: dict[str, int]) -> OperatorTrace:
    ops = (
        (Operator("conv", "forward", "aten.convolution", {"B": 1}),)
        if conv
        else (Operator("linear", "forward", "aten.mm", {"B": 1, "M": 2, "N": 2, "K": 2}),)
    )
    return OperatorTrace("w", framework, 8, ops, executed=False, **memory)  # type: ignore[arg-type]


def test_cpu_peak_is_the_traced_snapshot_term_by_term() -> None:
    m = step_memory(_trace(peak_memory=PEAK, memory_bytes=SUM), device="cpu")
    assert m.known and m.bytes == sum(PEAK.values())
    names = {t.name: t.value for t in m.terms}
    assert names["transient_backward"] == 50 * MIB and "transient_optimizer" not in names
    assert not any(t.prior for t in m.terms) and m.low == m.high == m.bytes
    assert any("full replica" in n for n in m.notes)


def test_gpu_adds_priors_by_framework_and_generation() -> None:
    tensors = sum(PEAK.values())
    hopper = step_memory(_trace(peak_memory=PEAK), device="gpu", generation="Hopper")
    fixed = {t.name: t for t in hopper.terms if t.prior}
    assert set(fixed) == {"framework_fixed", "allocator_reserve"}
    v, _, hi = FIXED_GIB["torch"]["Hopper"]
    assert (fixed["framework_fixed"].value, fixed["framework_fixed"].high) == (v * GIB, hi * GIB)
    assert fixed["allocator_reserve"].value == pytest.approx(RESERVE_FRACTION["torch"][0] * tensors)
    assert "Hopper" in fixed["framework_fixed"].source
    turing = step_memory(_trace(peak_memory=PEAK), device="gpu", generation="Turing")
    assert turing.bytes < hopper.bytes
    unknown = step_memory(_trace(peak_memory=PEAK), device="gpu", generation="Quantum")
    f = next(t for t in unknown.terms if t.name == "framework_fixed")
    assert (f.low, f.high) == (GENERIC_FIXED_GIB[1] * GIB, GENERIC_FIXED_GIB[2] * GIB)
    keras = step_memory(_trace("keras", memory_bytes=SUM), device="gpu", generation="Hopper")
    assert next(t for t in keras.terms if t.name == "framework_fixed").value > v * GIB
    assert hopper.low < hopper.bytes < hopper.high


def test_conv_workspace_prior_only_on_a_gpu_for_a_convolving_step() -> None:
    assert "conv_workspace" in {
        t.name for t in step_memory(_trace(conv=True, peak_memory=PEAK)).terms
    }
    assert "conv_workspace" not in {t.name for t in step_memory(_trace(peak_memory=PEAK)).terms}
    cpu = step_memory(_trace(conv=True, peak_memory=PEAK), device="cpu")
    assert "conv_workspace" not in {t.name for t in cpu.terms}


def test_cublas_workspaces_for_a_torch_step_that_multiplies() -> None:
    """PyTorch's default workspace per handle (32 MiB on sm_90, 8 MiB + 128 KiB elsewhere),
    two handles (forward, backward's thread) and cuBLASLt's 1 MiB: 65 MiB on Hopper, as the
    H200 measured; none for a step without matrix products, nor for Keras."""

    def cublas(trace: OperatorTrace, generation: str) -> float | None:
        terms = step_memory(trace, device="gpu", generation=generation).terms
        return next((t.value for t in terms if t.name == "cublas_workspace"), None)

    assert cublas(_trace(peak_memory=PEAK), "Hopper") == 65 * MIB
    assert cublas(_trace(peak_memory=PEAK), "Ampere") == (2 * 8.125 + 1) * MIB
    assert cublas(_trace(conv=True, peak_memory=PEAK), "Hopper") is None
    assert cublas(_trace("keras", memory_bytes=SUM), "Hopper") is None
    term = next(
        t
        for t in step_memory(_trace(peak_memory=PEAK), generation="Hopper").terms
        if t.name == "cublas_workspace"
    )
    assert not term.prior and term.low == 32 * MIB and "CublasHandlePool" in term.source


def test_without_a_peak_the_trace_terms_are_summed_and_said_so() -> None:
    m = step_memory(_trace(memory_bytes=SUM), device="cpu")
    assert m.bytes == 10 and "no peak tracked" in m.notes[0]


def test_no_memory_is_unknown_and_never_fits() -> None:
    m = step_memory(_trace(), device="gpu")
    assert not m.known and m.unknown_reason
    fit = memory_fit(m, 80 * GIB)
    assert fit.fits is None and fit.text().startswith("memory unknown")


def test_bad_device_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="device must be"):
        step_memory(_trace(peak_memory=PEAK), device="tpu")


def test_fit_texts() -> None:
    assert MemoryFit(21.3 * GIB, 22 * GIB, True, need_high_bytes=21.8 * GIB).text() == (
        "21.3 (up to 21.8) of 22.0 GiB"
    )
    assert (
        MemoryFit(30 * GIB, 22 * GIB, False).text()
        == "does not fit: needs 30.0 GiB per GPU, has 22.0"
    )
    tight = MemoryFit(21 * GIB, 22 * GIB, False, need_high_bytes=23 * GIB, tight=True)
    assert tight.text() == "does not fit (tight): needs 21.0 (up to 23.0) GiB per GPU, has 22.0"
    m = step_memory(_trace(peak_memory=PEAK), device="cpu")
    assert memory_fit(m, m.bytes).fits and not memory_fit(m, m.bytes - 1).fits


def test_a_row_fits_only_when_its_upper_estimate_does() -> None:
    """Issue #45: the fit keeps a margin: the central estimate fitting is "tight", not a fit;
    unknown memory never fits."""
    m = step_memory(_trace(peak_memory=PEAK), device="gpu", generation="Hopper")
    assert m.high > m.bytes  # the priors' ranges
    fit = memory_fit(m, m.high)
    assert fit.fits and not fit.tight
    between = memory_fit(m, (m.bytes + m.high) / 2)
    assert between.fits is False and between.tight and "tight" in between.text()
    assert memory_fit(m, m.bytes - 1).tight is False and not memory_fit(m, m.bytes - 1).fits
    unknown = memory_fit(StepMemory(8, known=False, unknown_reason="x"), 1e12)
    assert unknown.fits is None and unknown.text().startswith("memory unknown")


def test_each_generation_has_its_own_fixed_cost() -> None:
    """Issue #45: the per-generation priors are the ones used (a Turing T4's context is not a
    Hopper's)."""
    turing = step_memory(_trace(peak_memory=PEAK), device="gpu", generation="Turing")
    hopper = step_memory(_trace(peak_memory=PEAK), device="gpu", generation="Hopper")

    def fixed(m: StepMemory) -> MemoryTerm:
        return next(t for t in m.terms if t.name == "framework_fixed")

    assert fixed(turing).value < fixed(hopper).value
    assert "on Turing" in fixed(turing).source and "on Hopper" in fixed(hopper).source


def test_largest_fitting_batch_stops_at_the_first_that_does_not_fit() -> None:
    def at(b: int) -> StepMemory:
        return step_memory(_trace(peak_memory={"activations": b * GIB}), device="cpu")

    assert largest_fitting_batch(at, 10 * GIB, [16, 2, 4, 8]) == 8
    assert largest_fitting_batch(at, 1 * GIB, [2, 4]) is None


def test_split_peak_parts_optimizer_state_from_its_temporaries() -> None:
    class Dev:
        type = "meta"

    class Kind:
        def __init__(self, name: str) -> None:
            self.name = name

    snap = {
        Dev(): {Kind("PARAM"): 10, Kind("OPT"): 35, Kind("GRAD"): 10, Kind("OTH"): 1, "Total": 56}
    }
    out = split_peak(snap, "meta", state_bytes=20)
    assert out["optimizer_state"] == 20 and out["optimizer_temporaries"] == 15
    assert sum(out.values()) == 56
    assert split_peak(snap, "cpu", state_bytes=20) == {}


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            NotImplementedError(
                "aten::nonzero: attempted to run this operator with Meta tensors, but there "
                "was no fake impl or Meta kernel registered."
            ),
            "the trace cannot follow aten::nonzero (no meta kernel)",
        ),
        (RuntimeError("Cannot call numel() on tensor with data-dependent sizes"), "data-dependent"),
        ("boom", "the trace cannot follow this step (boom)"),
    ],
)
def test_an_untraceable_step_is_unknown_with_one_line_naming_why(
    error: object, reason: str
) -> None:
    m = untraceable(4, error)  # type: ignore[arg-type]
    assert not m.known and reason in m.unknown_reason and "\n" not in m.unknown_reason
    assert memory_fit(m, 80 * GIB).text().startswith("memory unknown (the trace cannot follow")
