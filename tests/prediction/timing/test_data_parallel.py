"""Data parallel's fixed cost (issue #35): a machine with more GPUs is predicted faster only
when its step amortises them."""

from __future__ import annotations

import pytest
from advisor.providers.catalog import load
from perf_fixtures import SyntheticTraces, gpu_machine, traced_probe

from advisor.prediction.memo import forget_all
from advisor.prediction.timing import constants as C
from advisor.prediction.timing.accel import buckets
from advisor.prediction.timing.model import predict

CAT = load()


@pytest.fixture(autouse=True)
def _fresh() -> None:

    forget_all()


def _t2(width: int, batch: int, gpus: int) -> float:
    p = traced_probe(batch=batch, width=width, layers=4)
    m = gpu_machine(f"p3x{gpus}", "V100", gpus, 3.06 * gpus)
    store = SyntheticTraces(width=width, layers=4)
    return predict(p, m, CAT, batch, trace_store=store).phases.t2.value


def test_a_small_network_at_a_small_batch_is_not_faster_on_eight_gpus() -> None:
    one, eight = _t2(64, 64, 1), _t2(64, 64, 8)
    assert eight >= one


def test_a_step_that_amortises_them_is_faster_on_eight_gpus() -> None:
    one, eight = _t2(4096, 4096, 1), _t2(4096, 4096, 8)
    assert eight < one / 4


def test_ddp_buckets_follow_pytorchs_defaults() -> None:
    assert buckets(0.5 * 1024**2) == 1
    assert buckets(C.DDP_FIRST_BUCKET_BYTES + 1) == 2
    assert buckets(C.DDP_FIRST_BUCKET_BYTES + 50 * 1024**2) == 3
