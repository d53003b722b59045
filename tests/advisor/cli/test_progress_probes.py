"""`advisor suggest`'s progress names each local probe while it runs (issue #16)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.search_spaces.loader import default_space

from advisor.cli.suggest import progress_label
from advisor.options import SuggestOptions, workload_info
from advisor.study.run import local_backend


def fake_probe(request: ProbeRequest, **_: Any) -> ProbeResult:  # excuse_cpu_wait
    return ProbeResult(
        workload=request.workload,
        framework="torch",
        batch_size=request.batch_size,
        device="cpu",
        threads=1,
        init_s=1.0,
        iteration_s=(0.5, *([0.1] * 7)),
        validation_s=(0.2, 0.1),
        validation_samples_measured=212,
        n_train=40_512,
        n_val=212,
        wall_s=3.0,
    )


def test_each_new_local_probe_is_announced_and_a_cached_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import advisor.probes.runner

    monkeypatch.setattr(advisor.probes.runner, "run_probe", fake_probe)
    seen: list[tuple[str, int, int]] = []
    options = SuggestOptions(model="fcn", budget_usd=5)
    backend = local_backend(
        options, f"sqlite:///{tmp_path / 's.db'}", default_space("fcn"), lambda *a: seen.append(a)
    )
    workload = workload_info(options)
    backend.probe(workload, 512, {})
    backend.probe(workload, 512, {})  # cached: no line
    assert seen == [("probe:probing fcn at batch 512 on this machine", 0, 1)]
    assert progress_label(seen[0][0], 1) == "probing fcn at batch 512 on this machine"
