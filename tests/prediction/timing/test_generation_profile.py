"""The whole-model generation profile (issue #47): its roofline formula and its checks."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.prediction.timing import constants as C
from advisor.prediction.timing.device import roofline_seconds


@dataclasses.dataclass(frozen=True)
class _Spec:
    fp32_tflops: float = 4.0
    tf32_tflops: float | None = None
    bf16_tflops: float | None = None
    fp16_tflops: float | None = None
    memory_bandwidth_gbs: float = 200.0


def test_device_time_is_flops_at_the_achieved_sustained_peak_plus_bytes_at_the_achieved_bandwidth():
    profile = C.GenerationProfile("k", 1.0, 1.0, 1.0, whole_model=True, efficiency=2.0,
                                  memory_efficiency=0.25, sustained_clock=0.5)  # fmt: skip
    compute, memory = roofline_seconds(8e12, 10e9, _Spec(), profile)
    assert compute == pytest.approx(8e12 / (2.0 * 0.5 * 4e12))  # 2 s
    assert memory == pytest.approx(10e9 / (0.25 * 200e9))  # 0.2 s


def test_without_a_fitted_bandwidth_share_the_roofline_keeps_its_prior() -> None:
    profile = C.GenerationProfile("t", 1.0, 1.0, 1.0, efficiency=0.5)
    _, memory = roofline_seconds(0.0, 1e9, _Spec(), profile)
    assert memory == pytest.approx(1e9 / (C.ROOFLINE_MEMORY_EFFICIENCY * 200e9))


def test_kepler_ships_a_whole_model_profile_at_its_base_clock() -> None:
    kepler = C.GENERATIONS["kepler"]
    assert kepler.whole_model and kepler.device_scale == 1.0
    assert kepler.sustained_clock == pytest.approx(560 / 875)
    assert not C.GENERATIONS["pascal"].whole_model  # measured P100 kernels


@pytest.mark.parametrize(
    "fields",
    [
        {"whole_model": True, "efficiency": 1.5},  # no bandwidth share
        {"efficiency": 1.5},  # above the peak without a whole-model fit
        {"whole_model": True, "efficiency": 1.0, "memory_efficiency": 1.5},
        {"sustained_clock": 0.0},
    ],
)
def test_a_profile_out_of_range_is_refused(fields: dict) -> None:
    with pytest.raises(ValueError):
        C.GenerationProfile("x", 1.0, 1.0, 1.0, **fields)
