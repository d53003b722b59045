"""The data-parallel step per framework (issue #47): DDP, one process driving every replica
(Keras MirroredStrategy), and the all-reduce over the machine's own topology."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from cli_run import run
from hypothesis import given, settings
from hypothesis import strategies as st
from perf_fixtures import probe, with_synthetic_trace

from advisor.prediction.timing import constants as C
from advisor.prediction.timing.accel import ddp_allreduce
from advisor.prediction.timing.collective import Link, allreduce_seconds, bus_bandwidth

NVLINK = Link(100e9, "nvlink")
PCIE = Link(10e9, "pcie", devices_per_link=2)


def test_bus_bandwidth_grows_with_the_message_and_saturates_at_the_link() -> None:
    small, large = bus_bandwidth(64 * 1024, 8, NVLINK), bus_bandwidth(1024**3, 8, NVLINK)
    assert small < 0.2 * large
    assert large == pytest.approx(100e9, rel=0.01)


def test_the_ring_moves_2_n_minus_1_over_n_of_the_message() -> None:
    one_gb = 1e9
    t2, t8 = allreduce_seconds(one_gb, 2, PCIE), allreduce_seconds(one_gb, 8, PCIE)
    assert t8 / t2 == pytest.approx(1.75, rel=0.01)
    assert allreduce_seconds(one_gb, 1, PCIE) == 0.0


def bucket_sizes(gradient_bytes: float) -> list[float]:
    """DDP's buckets in the order they are reduced (the last: the first layers'), listed."""
    first = min(gradient_bytes, float(C.DDP_FIRST_BUCKET_BYTES))
    full, tail = divmod(gradient_bytes - first, float(C.DDP_BUCKET_BYTES))
    return [first, *[float(C.DDP_BUCKET_BYTES)] * int(full), *([tail] if tail > 0 else [])]


@settings(deadline=None)  # the reference lists up to 8,000 buckets: slow beside other tests
@given(st.floats(0, 2e11), st.sampled_from([1, 2, 8, 64]))
def test_ddps_all_reduce_is_the_sum_over_its_buckets(gradient_bytes: float, n: int) -> None:
    """The closed form (a latency a bucket, the bytes once over the bus) equals the sum of
    one all-reduce per bucket, listed; the last bucket is the listed one's."""
    parts = ddp_allreduce(gradient_bytes, n, NVLINK, device_s=1e9)  # all but the last hidden
    listed = bucket_sizes(gradient_bytes)
    assert parts["allreduce_total"] == pytest.approx(
        sum(allreduce_seconds(s, n, NVLINK) for s in listed), rel=1e-9, abs=1e-15
    )
    assert parts["allreduce"] == pytest.approx(allreduce_seconds(listed[-1], n, NVLINK))


def test_ddp_hides_buckets_behind_backward_but_never_the_last() -> None:
    grad = 100 * 1024**2
    assert sum(bucket_sizes(grad)) == pytest.approx(grad)
    long_step = ddp_allreduce(grad, 8, PCIE, device_s=10.0)
    short_step = ddp_allreduce(grad, 8, PCIE, device_s=1e-4)
    assert long_step["allreduce"] == pytest.approx(
        allreduce_seconds(bucket_sizes(grad)[-1], 8, PCIE)
    )
    assert short_step["allreduce"] > long_step["allreduce"]


def _predict(tmp_path: Path, framework: str, *extra: str) -> tuple[dict, str]:
    p = with_synthetic_trace(dataclasses.replace(probe(), fingerprint={"data_s": 0.004}))
    path = tmp_path / f"{framework}.json"
    path.write_text(dataclasses.replace(p, framework=framework).to_json())
    args = ["predict", "-m", "fcn", "-b", "512", "-i", "ec2:p3.16xlarge,ec2:p2.8xlarge",
            "--framework", framework, "--probe", str(path), *extra]  # fmt: skip
    got = run(*args, "--json")
    assert got.code == 0, got.err
    verbose = run(*args, "--verbose")
    assert verbose.code == 0, verbose.err
    rows = {m["machine"]: m["prediction"]["breakdown"] for m in json.loads(got.out)["machines"]}
    return rows, verbose.out + verbose.err


def test_keras_and_torch_differ_where_the_frameworks_do(tmp_path: Path) -> None:
    torch_rows, torch_text = _predict(tmp_path, "torch")
    keras_rows, keras_text = _predict(tmp_path, "keras")
    v100_t, v100_k = torch_rows["ec2:p3.16xlarge"], keras_rows["ec2:p3.16xlarge"]
    assert v100_k.get("dp_host_serial", 0) > 0 and "dp_host_serial" not in v100_t
    assert v100_t["dp_allreduce_total"] >= v100_t["allreduce"]  # overlapped with backward
    assert v100_k["allreduce"] == pytest.approx(v100_k["dp_allreduce_total"])  # after backward
    assert "DistributedDataParallel" in torch_text and "all-reduce" in torch_text
    assert "MirroredStrategy" in keras_text and "in series" in keras_text


def test_a_link_of_another_kind_brings_its_own_latency() -> None:
    network = Link(12.5e9, "network", latency_s=(50e-6, 5e-6))
    assert allreduce_seconds(8, 2, network) == pytest.approx(55e-6, rel=0.01)
