"""`advisor predict` reuses the probe `advisor suggest` cached, and takes module:function."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from advisor.probes.result import ProbeResult
from perf_fixtures import with_synthetic_trace

from advisor.cli.main import main
from advisor.evaluation.local import ProbeCache, probe_cache_key
from advisor.evaluation.predict_api import cached_probe
from advisor.evaluation.workload import WorkloadInfo
from advisor.storage.urls import resolve_storage

# issue #26: a probe made ready for prediction (its operator trace and loader time), so
# no trace is taken here (no torch import)
TRACE = {"data_s": 0.004}


def _probe(workload: str, batch: int, threads: int) -> ProbeResult:
    return with_synthetic_trace(ProbeResult(
        workload=workload, framework="torch", batch_size=batch, device="cpu", threads=threads,
        init_s=2.0, iteration_s=(0.8, 0.2, 0.21, 0.2, 0.2), validation_s=(1.0, 0.9),
        n_train=60000, n_val=10000, flops_per_iteration=2.0e9, parameters=1_000_000,
        wall_s=5.0, fingerprint=dict(TRACE),
    ))  # fmt: skip


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(["predict", *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _no_probe(*_: Any, **__: Any) -> Any:
    raise AssertionError("predict probed although a cached probe exists")


def test_predict_uses_the_probe_suggest_cached(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, _advisor_home: Path
) -> None:
    _advisor_home.mkdir(parents=True, exist_ok=True)
    url = resolve_storage(None)
    key = probe_cache_key(WorkloadInfo("fcn", "torch", n_train=1), 256, 2, 8, {})
    ProbeCache(url).put(key, _probe("fcn", 256, 2))
    assert cached_probe("fcn", 256, threads=2) is not None
    assert cached_probe("fcn", 512, threads=2) is None  # another batch size: not cached
    monkeypatch.setattr("advisor.cli.probe_view.run_with_progress", _no_probe)
    code, out, err = _run(
        capsys, "--model", "fcn", "-b", "256", "-i", "p3.2xlarge", "--threads", "2"
    )
    assert code == 0, err
    assert "Using the probe advisor suggest cached for fcn at batch 256" in err
    assert "[interval] in brackets" in " ".join(out.split())
    code, out, _ = _run(
        capsys, "--model", "fcn", "-b", "256", "-i", "p3.2xlarge", "--threads", "2", "--json"
    )
    assert code == 0 and json.loads(out)["probe"]["iteration_s"][1] == 0.2


def test_cached_probe_finds_the_epochs_anchor_probe(_advisor_home: Path) -> None:
    """Issue #19: suggest caches the anchor batch's probe (which also measured the gradient
    noise scale) under its own key; predict reuses it like any other."""
    _advisor_home.mkdir(parents=True, exist_ok=True)
    key = probe_cache_key(WorkloadInfo("fcn", "torch", n_train=1), 256, 2, 8, {}, noise=True)
    ProbeCache(resolve_storage(None)).put(key, _probe("fcn", 256, 2))
    assert cached_probe("fcn", 256, threads=2) is not None


def test_cached_probe_never_creates_a_storage(_advisor_home: Path) -> None:
    assert cached_probe("fcn", 256) is None
    assert not _advisor_home.exists() or not any(_advisor_home.iterdir())


def test_predict_takes_module_function(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe_file = tmp_path / "probe.json"
    probe_file.write_text(json.dumps(_probe("mypkg.models:build", 128, 2).to_dict()))
    monkeypatch.setattr("advisor.cli.probe_view.run_with_progress", _no_probe)
    code, out, err = _run(
        capsys, "--model", "mypkg.models:build", "-b", "128", "-i", "p3.2xlarge,g4dn.xlarge",
        "--probe", str(probe_file), "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["workload"] == "mypkg.models:build" and len(doc["machines"]) == 2
    assert doc["epochs"] == 10  # a user model without --epochs runs 10
