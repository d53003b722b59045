"""A TPU's memory per data-parallel device (issue #47): HBM per core, XLA's buffers as priors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from cli_run import run
from perf_fixtures import probe, with_synthetic_trace

from advisor.prediction.memory.tpu import tpu_devices, xla_terms

TPUS = "compute-engine:v2-8,compute-engine:v3-8,compute-engine:v4-8,compute-engine:v5litepod-8"


def test_devices_and_hbm_per_device_follow_the_published_cores_per_chip() -> None:
    assert tpu_devices("TPU-v3", 4, 32.0)[:2] == (8, 16.0)  # 2 TensorCores, 16 GiB each
    assert tpu_devices("TPU-v2", 4, 16.0)[:2] == (8, 8.0)
    assert tpu_devices("TPU-v4", 4, 32.0)[:2] == (4, 32.0)  # one megacore device per chip
    assert tpu_devices("TPU-v9", 2, 64.0)[:2] == (2, 64.0)  # unknown: one device per chip


def test_xla_terms_are_priors_that_grow_with_the_tensors() -> None:
    small, large = xla_terms(1e9), xla_terms(2e9)
    assert all(t.prior for t in small)
    padding = {t.name: t.value for t in large}["tile_padding"]
    assert padding == pytest.approx(2 * {t.name: t.value for t in small}["tile_padding"])


@pytest.mark.parametrize(
    "framework",
    ["torch", pytest.param("keras", marks=pytest.mark.slow)],  # keras: 13 s (TF)
)
def test_predict_on_tpus_answers_with_memory_per_core(tmp_path: Path, framework: str) -> None:
    p = with_synthetic_trace(dataclasses.replace(probe(), fingerprint={"data_s": 0.004}))
    p = dataclasses.replace(p, framework=framework)
    path = tmp_path / "probe.json"
    path.write_text(p.to_json())
    got = run("predict", "-m", "fcn", "-b", "256", "-i", TPUS, "--framework", framework,
              "--probe", str(path), "--json")  # fmt: skip
    assert got.code == 0, got.err
    rows = {m["machine"]: m["memory"] for m in json.loads(got.out)["machines"]}
    v3, v4 = rows["compute-engine:v3-8"], rows["compute-engine:v4-8"]
    assert (v3["devices"], v3["per_device_batch"], v3["have_gib"]) == (8, 32, 16.0)
    assert (v4["devices"], v4["per_device_batch"], v4["have_gib"]) == (4, 64, 32.0)
    assert rows["compute-engine:v2-8"]["have_gib"] == 8.0
    assert v3["fits"] is True
    names = {t["name"] for t in v3["step"]["terms"]}
    assert {"xla_runtime", "tile_padding"} <= names
