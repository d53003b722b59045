"""Issue #36: the first answer from the operator trace, before the local probes run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from advisor.report.first_answer import HEADING, lines


def _row(machine: str, batch: int, t: float, c: float) -> dict[str, Any]:
    return {
        "machine": machine,
        "batch_size": batch,
        "runtime_s": {"value": t, "low": t / 2, "high": t * 3},
        "cost_usd": {"value": c, "low": c / 2, "high": c * 3},
    }


def test_the_block_names_what_it_rests_on_and_the_next_rows() -> None:
    best = _row("ec2:g5.12xlarge:spot", 1024, 150.0, 0.088)
    report = {"recommended": best, "ranking": [best, _row("ec2:g6e.xlarge", 512, 160.0, 0.1)]}
    text = lines(report, top=3)
    assert text[0] == HEADING and "GPU machines only" in text[0]
    assert text[1].startswith("  recommended: ec2:g5.12xlarge:spot batch 1024: 2.5 min")
    assert text[2].startswith("  then: ec2:g6e.xlarge batch 512") and len(text) == 3
    assert lines({"recommended": None}) == []


@pytest.mark.slow  # traces fcn at four batch sizes (torch)
def test_the_first_answer_ranks_gpu_machines_from_the_trace_and_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor.evaluation.trace_only import REASON
    from advisor.options import SuggestOptions
    from advisor.pipeline import first_answer

    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path))
    report = first_answer(SuggestOptions(model="fcn", budget_usd=5.0))
    assert report is not None and report["recommended"]
    rows = report["ranking"]
    assert rows and all(":" in r["machine"] and not r["machine"].startswith("local") for r in rows)
    assert report["probes"]["new"] == 0  # nothing timed here
    assert f"Traced without a local timing ({REASON})" in report["first_answer_basis"]
    assert not (tmp_path / "studies.db").exists()  # the final run takes its own probes


def test_the_first_answer_runs_once_before_the_first_probe_and_never_when_cached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import advisor.probes.runner as runner
    import optuna
    from advisor.probes.result import ProbeResult

    from advisor.evaluation.contract import RunSettings
    from advisor.evaluation.local import LocalBackend
    from advisor.evaluation.probe_cache import probe_cache_key
    from advisor.options import SuggestOptions, workload_info

    calls: list[Any] = []
    monkeypatch.setattr(runner, "run_probes", lambda reqs, **kw: calls.append(len(reqs)))
    backend = LocalBackend(optuna.storages.InMemoryStorage(), catalog=object())
    backend.configure(RunSettings(before_probes=lambda: calls.append("first answer")))
    workload = workload_info(SuggestOptions(model="fcn"))
    backend.prefetch(workload, (256, 512))
    backend.prefetch(workload, (256, 512))  # still missing (the fake timed nothing): once only
    assert calls == ["first answer", 2, 2]
    warm = LocalBackend(optuna.storages.InMemoryStorage(), catalog=object())
    for b in (256, 512):
        key = probe_cache_key(workload, b, warm.threads, warm.iterations, {}, False)
        warm.cache.put(key, ProbeResult("fcn", "torch", b, "cpu", 2, iteration_s=(1.0, 1.0)))
    warm.configure(RunSettings(before_probes=lambda: calls.append("first answer again")))
    warm.prefetch(workload, (256, 512))
    assert "first answer again" not in calls  # every probe cached: the final answer is quick


@pytest.mark.parametrize("reason", ["INTERRUPTED", "TERMINATED"])
def test_ctrl_c_met_by_the_first_answers_own_study_stops_the_command(
    reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first answer's study stops on Ctrl-C (or SIGTERM) as any study does; the key was
    pressed for the command, so it is raised again rather than the run going on."""
    from types import SimpleNamespace

    import advisor.pipeline as pipeline
    from advisor.errors import Terminated
    from advisor.options import SuggestOptions
    from advisor.outcome import Stop, StopReason

    stopped = SimpleNamespace(stop=Stop(StopReason[reason]))
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path))
    monkeypatch.setattr(pipeline, "run_suggest", lambda *a, **k: stopped)
    raised = Terminated if reason == "TERMINATED" else KeyboardInterrupt
    with pytest.raises(raised):
        pipeline.first_answer(SuggestOptions(model="fcn", budget_usd=5))
