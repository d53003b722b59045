"""A user model that raises, through `advisor suggest` with real local probes: each batch size
is probed once, the run ends quickly with one line saying why, and the failures are FAIL
trials of the study with their reason."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from cli_run import error_lines
from repo_paths import HELPERS

from advisor.evaluation.local import PROBE_CACHE_STUDY


@pytest.mark.slow
def test_a_model_that_raises_ends_quickly_with_one_line(tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("workload: user_models:build_failing\nbatch_sizes: [8, 16, 32]\n")
    storage = f"sqlite:///{tmp_path / 's.db'}"
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable, "-m", "advisor.cli.main", "suggest",
            "--model", "user_models:build_failing", "--n-train", "512", "--n-val", "128",
            "--space", str(space), "--storage", storage,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(HELPERS)},
    )  # fmt: skip
    wall = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = error_lines(proc.stderr)
    assert len(lines) <= 2, lines  # the problem, and the fix
    assert "Every probe of user_models:build_failing failed" in proc.stderr
    assert "3 of 3 batch sizes raised an error on this machine (8, 16, 32)" in proc.stderr
    assert "shapes do not match" in proc.stderr
    # every machine x batch pair was not re-probed: one probe per batch size, in the cache
    cache = optuna.load_study(study_name=PROBE_CACHE_STUDY, storage=storage)
    assert len(cache.user_attrs) == 3
    assert all(v["probe"]["status"] == "error" for v in cache.user_attrs.values())
    (name,) = [
        s.study_name
        for s in optuna.get_all_study_summaries(storage)
        if s.study_name != PROBE_CACHE_STUDY
    ]
    failed = optuna.load_study(study_name=name, storage=storage).get_trials(
        states=(optuna.trial.TrialState.FAIL,)
    )
    assert sorted(t.params["batch_size"] for t in failed) == [8, 16, 32]
    assert all("shapes do not match" in t.user_attrs["pruned_reason"] for t in failed)
    assert wall < 120, wall  # three probe processes, not one per machine x batch pair
    print(f"failing model: 3 probes, exit 2 after {wall:.1f} s")
