"""Failed probes are results: cached by key with their reason, recorded once as FAIL trials,
summarised, and bounded by --timeout (local back end with an injected probe runner)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import pytest
from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.search_spaces.loader import default_space
from advisor.search_spaces.space import MachineFilter
from short_runs import Clock

from advisor.errors import AdvisorError
from advisor.evaluation.local import LocalBackend
from advisor.options import SuggestOptions
from advisor.study.run import run_suggest

# This machine only (catalog machines would be modelled from the same local probe).
LOCAL = replace(
    default_space("fcn"),
    batch_sizes=(128, 256, 512, 1024),
    machines=MachineFilter(providers=("local",), include_local=True, spot=False),
)


class Runner:
    """Stands in for ``run_probe``: counts calls; batch sizes in ``fail`` fail with a status."""

    def __init__(self, fail: dict[int, str], sleep_s: float = 0.0) -> None:
        self.fail = fail
        self.sleep_s = sleep_s
        self.clock = Clock()  # a simulated clock: each call takes ``sleep_s`` of it
        self.calls: list[ProbeRequest] = []

    def __call__(self, req: ProbeRequest) -> ProbeResult:
        self.calls.append(req)
        self.clock.t += self.sleep_s
        status = self.fail.get(req.batch_size)
        if status is not None:
            return ProbeResult.failure(req, status, f"{status} at batch {req.batch_size}", 0.1)  # type: ignore[arg-type]
        step = 0.001 * req.batch_size  # a plausible CPU step: 1 ms per sample
        return ProbeResult(
            req.workload,
            req.framework,
            req.batch_size,
            "cpu",
            req.threads,
            init_s=0.5,
            iteration_s=(3 * step, *([step] * 7)),
            validation_s=(0.4, 0.3),
            validation_samples_measured=1000,
        )


def _run(tmp_path: Path, runner: Runner, **kw: Any) -> Any:
    """The search over ``runner``'s probes, ``--timeout`` measured on its simulated clock."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    backend = LocalBackend(url, run_probe=runner, threads=2)
    opts = SuggestOptions(model="fcn", space=kw.pop("space", LOCAL), storage=url, **kw)
    return run_suggest(opts, backend=backend, clock=runner.clock)


def _failed(outcome: Any) -> list[optuna.trial.FrozenTrial]:
    return outcome.study.get_trials(states=(optuna.trial.TrialState.FAIL,))


def test_oom_batch_sizes_are_probed_once_recorded_and_summarised(tmp_path: Path) -> None:
    runner = Runner({512: "oom", 1024: "oom"})
    outcome = _run(tmp_path, runner, budget_usd=5.0)
    assert sorted(r.batch_size for r in runner.calls) == [128, 256, 512, 1024]  # once each
    failed = _failed(outcome)
    assert sorted(t.params["batch_size"] for t in failed) == [512, 1024]
    assert all(t.user_attrs["pruned_reason"].startswith("probe oom: oom at batch") for t in failed)
    assert outcome.study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    (entry,) = outcome.probe_failures
    assert entry["status"] == "oom" and entry["batch_sizes"] == [512, 1024]
    assert entry["text"].startswith(
        "2 of 4 batch sizes ran out of memory on this machine (512, 1024)"
    )
    # a second run reads the failures from the cache: no probe runs again, no new FAIL trial
    again = Runner({})
    second = _run(tmp_path, again, budget_usd=5.0)
    assert again.calls == [] and len(_failed(second)) == 2
    assert [e["batch_sizes"] for e in second.probe_failures] == [[512, 1024]]


@pytest.mark.parametrize("screen", [True, False])
def test_a_model_that_raises_is_tried_once_per_batch_size_and_ends_with_one_line(
    tmp_path: Path, screen: bool
) -> None:
    runner = Runner({b: "error" for b in LOCAL.batch_sizes})
    with pytest.raises(AdvisorError) as err:
        _run(tmp_path, runner, budget_usd=5.0, screen=screen)
    assert len(runner.calls) == 4
    text = str(err.value)
    assert "Every probe of fcn failed" in text
    assert "4 of 4 batch sizes raised an error on this machine (128, 256, 512, 1024)" in text
    assert "advisor probe --model fcn --batch-size 128" in text
    stored = optuna.load_study(
        study_name=optuna.get_all_study_summaries(f"sqlite:///{tmp_path / 's.db'}")[-1].study_name,
        storage=f"sqlite:///{tmp_path / 's.db'}",
    )
    assert len(stored.get_trials(states=(optuna.trial.TrialState.FAIL,))) == 4


@pytest.mark.parametrize("screen", [True, False])
def test_transient_failures_are_reused_within_a_run_and_retried_by_the_next(
    tmp_path: Path, screen: bool
) -> None:
    runner = Runner({256: "error", 512: "timeout", 1024: "oom"})
    _run(tmp_path, runner, budget_usd=5.0, screen=screen, trials=None if screen else 30)
    assert sorted(r.batch_size for r in runner.calls) == [128, 256, 512, 1024]
    fixed = Runner({1024: "oom"})  # the user fixed the bug; the machine still has 16 GB
    _run(tmp_path, fixed, budget_usd=5.0, screen=screen, trials=None if screen else 30)
    assert sorted(r.batch_size for r in fixed.calls) == [256, 512]  # oom is not retried


def test_timeout_bounds_the_screen_and_the_probes(tmp_path: Path) -> None:
    space = replace(LOCAL, batch_sizes=tuple(2**i for i in range(3, 13)))  # 10 batch sizes
    runner = Runner({}, sleep_s=0.8)  # on the simulated clock: the machine's load is not in it
    outcome = _run(tmp_path, runner, budget_usd=5.0, space=space, timeout_s=2.0)
    assert outcome.stop_reason == "timeout (during screening)"
    # Probes at 0, 0.8 and 1.6 s start before the 2 s deadline; a fourth would start at 2.4 s.
    assert len(runner.calls) == 3
    # Each probe's own time-out is what --timeout leaves, at least 1 s.
    assert [round(r.timeout_s, 6) for r in runner.calls] == [2.0, 1.2, 1.0]


def test_the_report_carries_the_failure_summary(tmp_path: Path) -> None:
    import advisor

    url = f"sqlite:///{tmp_path / 's.db'}"
    backend = LocalBackend(url, run_probe=Runner({1024: "nan"}), threads=2)
    report = advisor.suggest(model="fcn", space=LOCAL, storage=url, budget_usd=5.0, backend=backend)
    (entry,) = report["probe_failures"]
    assert entry["status"] == "nan" and entry["batch_sizes"] == [1024]
    assert f"Failed probes: {entry['text']}." in report["notes"]
    assert report["recommended"]["batch_size"] != 1024
