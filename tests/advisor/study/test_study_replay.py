"""The study end to end against the replay back end (fast, no probes)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import pytest
from advisor.probes.result import ProbeResult
from advisor.search_spaces.loader import default_space

from advisor.errors import AdvisorError
from advisor.evaluation.local import ProbeCache
from advisor.evaluation.replay import ReplayBackend, ReplayTable
from advisor.options import SuggestOptions
from advisor.outcome import SuggestOutcome
from advisor.study.run import run_suggest
from advisor.study.selection import pareto_front, recommended_trial

SPACE = replace(default_space("fcn"), batch_sizes=(256, 512))


def _truth(table: ReplayTable) -> dict[tuple[str, int], tuple[float, float]]:
    """(machine key, batch) -> (runtime, cost) as the replay table defines them."""
    out = {}
    for e in table.entries:
        inst = next(i for i in table.instances if i.key == e.machine)
        assert e.runtime is not None
        out[(e.machine, e.batch_size)] = (e.runtime.value, e.runtime.value * inst.price() / 3600)
    return out


def _run(
    tmp_path: Path, table: ReplayTable, sqlite: bool = False, **kw: Any
) -> tuple[optuna.Study, ReplayBackend, SuggestOutcome]:
    """Run the study on the replay table (in memory unless ``sqlite``)."""
    backend = ReplayBackend(table)
    opts = SuggestOptions(model="fcn", space=SPACE, storage=f"sqlite:///{tmp_path / 's.db'}", **kw)
    storage = None if sqlite else optuna.storages.InMemoryStorage()
    outcome = run_suggest(opts, backend=backend, storage=storage)
    return outcome.study, backend, outcome


@pytest.mark.parametrize("screen", [True, False])
def test_fastest_within_budget_is_recommended(
    tmp_path: Path, table: ReplayTable, screen: bool
) -> None:
    study, _, _ = _run(tmp_path, table, budget_usd=1.0, screen=screen, trials=40)
    truth = _truth(table)
    fits = {k: v for k, v in truth.items() if v[1] <= 1.0}
    best = min(fits, key=lambda k: fits[k][0])
    t = recommended_trial(study)
    assert (t.params["machine"].removesuffix(":spot"), t.params["batch_size"]) == best
    # Every trial over the budget is marked infeasible through Optuna's constraints too.
    for tr in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)):
        over = tr.user_attrs["cost_usd"]["value"] > 1.0
        assert tr.user_attrs["feasible"] is (not over)
        assert (tr.system_attrs["constraints:budget"] > 0) is over


def test_trials_carry_the_agreed_attrs(tmp_path: Path, table: ReplayTable) -> None:
    study, _, _ = _run(tmp_path, table, budget_usd=5.0)
    assert study.user_attrs["workload"] == "fcn"
    assert study.user_attrs["objective"] == "time"
    assert study.user_attrs["catalog_snapshot"] == "test-2021-02"
    assert study.user_attrs["space"]["batch_sizes"] == [256, 512]
    assert study.metric_names == ["runtime_s"]
    t = study.trials[0]
    for key in (
        "estimate",
        "source",
        "price_per_hour",
        "spot",
        "instance",
        "epochs",
        "runtime_s",
        "cost_usd",
        "probe_cost",
        "probe",
        "phases",
    ):
        assert key in t.user_attrs, key
    assert t.user_attrs["instance"]["catalog_snapshot"] == "test-2021-02"
    assert t.user_attrs["probe_cost"]["charged_usd"] > 0
    assert set(t.params) >= {"machine", "batch_size", "lr", "momentum", "dropout", "weight_decay"}


def test_cost_objective_with_deadline(tmp_path: Path, table: ReplayTable) -> None:
    study, _, outcome = _run(tmp_path, table, deadline_s=1000.0)
    assert outcome.objective == "cost"
    truth = _truth(table)
    fits = {k: v for k, v in truth.items() if v[0] <= 1000.0}
    t = recommended_trial(study)
    assert t.user_attrs["runtime_s"]["value"] <= 1000.0
    # spot capacity of the cheapest fitting machine may win: compare with the best cost.
    assert t.user_attrs["cost_usd"]["value"] <= min(v[1] for v in fits.values()) + 1e-9


def test_pareto_front_is_non_dominated(tmp_path: Path, table: ReplayTable) -> None:
    study, _, _outcome = _run(tmp_path, table, objective="pareto", trials=40)
    assert study.metric_names == ["runtime_s", "cost_usd"]
    trials = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    front = pareto_front(trials)
    assert len(front) >= 2
    pts = [(t.values[0], t.values[1]) for t in trials]
    for f in front:
        fp = (f.values[0], f.values[1])
        assert not any(p[0] <= fp[0] and p[1] <= fp[1] and p != fp for p in pts)
    assert recommended_trial(study) in front


def test_resume_reuses_the_study_and_probes_nothing_new(tmp_path: Path, table: ReplayTable) -> None:
    study1, _b1, o1 = _run(tmp_path, table, sqlite=True, budget_usd=5.0)
    n1 = len(study1.trials)
    study2, b2, o2 = _run(tmp_path, table, sqlite=True, budget_usd=5.0)
    assert study2.study_name == study1.study_name
    assert o2.resumed and not o1.resumed
    assert len(study2.trials) >= n1
    assert o2.new_trials == 0 and b2.probed == []


def test_probe_budget_stops_the_search(tmp_path: Path, table: ReplayTable) -> None:
    # small_table probes take 30 s: the p3.16xlarge probe costs USD 0.204 alone.
    _study, _, outcome = _run(tmp_path, table, budget_usd=5.0, probe_budget_usd=0.01, screen=True)
    assert outcome.probe_spent_usd <= 0.01 + 1e-9
    assert outcome.stop_reason == "probe budget spent"


def test_failed_configuration_is_recorded_and_search_goes_on(
    tmp_path: Path, table: ReplayTable
) -> None:
    # batch 1024 is not in the table: the replay serves it as a failure
    space = replace(SPACE, batch_sizes=(256, 512, 1024))
    backend = ReplayBackend(table)
    opts = SuggestOptions(model="fcn", space=space, budget_usd=5.0, screen=False, trials=25)
    study = run_suggest(opts, backend=backend, storage=optuna.storages.InMemoryStorage()).study
    failed = study.get_trials(states=(optuna.trial.TrialState.FAIL,))
    assert failed and all("pruned_reason" in t.user_attrs for t in failed)
    assert study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))


@pytest.mark.parametrize("sampler", ["random", "nsga2", "skopt"])
def test_other_samplers_run(tmp_path: Path, table: ReplayTable, sampler: str) -> None:
    study, _, _ = _run(tmp_path, table, budget_usd=5.0, sampler=sampler, screen=False, trials=5)
    assert len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) == 5


def test_recommended_trial_without_feasible_trials_is_a_user_error() -> None:
    study = optuna.create_study()
    with pytest.raises(AdvisorError, match="no feasible"):
        recommended_trial(study)


def test_probe_cache_lives_in_the_storage(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    probe = ProbeResult("fcn", "torch", 256, "cpu", 2, iteration_s=(1.0, 0.2, 0.2))
    ProbeCache(url).put("k", probe)
    assert ProbeCache(url).get("k") == probe
    ProbeCache(url).put("bad", replace(probe, status="timeout", iteration_s=()))
    # a time-out is reused by the run that saw it and retried by a later one
    assert ProbeCache(url).get("bad", since=0.0) == replace(probe, status="timeout", iteration_s=())
    assert ProbeCache(url).get("bad", since=time.time() + 1) is None
    assert ProbeCache(url).get("bad") is None


class _InterruptedBackend(ReplayBackend):
    """Raises KeyboardInterrupt (as Ctrl-C would) during its third evaluation."""

    calls = 0

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == 3:
            raise KeyboardInterrupt
        return super().evaluate(*args, **kwargs)


def test_ctrl_c_keeps_finished_trials_and_a_rerun_resumes(
    tmp_path: Path, table: ReplayTable
) -> None:
    opts = SuggestOptions(
        model="fcn", space=SPACE, storage=f"sqlite:///{tmp_path / 's.db'}", budget_usd=5.0,
        screen=False, probe_budget_usd=100.0, trials=10,
    )  # fmt: skip
    first = run_suggest(opts, backend=_InterruptedBackend(table))
    assert first.stop_reason.startswith("interrupted")
    stored = optuna.load_study(study_name=first.study.study_name, storage=opts.storage)
    states = [t.state for t in stored.trials]
    assert states.count(optuna.trial.TrialState.COMPLETE) == 2  # both finished trials kept
    assert states[-1] == optuna.trial.TrialState.FAIL  # the interrupted one, marked
    kept = len(states)
    again = ReplayBackend(table)
    second = run_suggest(opts, backend=again)
    assert second.resumed and second.study.study_name == first.study.study_name
    finished_before = {
        (t.params["machine"], t.params["batch_size"])
        for t in stored.trials[:kept]
        if t.state == optuna.trial.TrialState.COMPLETE
    }
    new_trials = second.study.trials[kept:]
    assert new_trials and second.probe_spent_usd >= first.probe_spent_usd
    for t in new_trials:  # what was already measured is not charged again
        if (t.params.get("machine"), t.params.get("batch_size")) in finished_before:
            assert t.user_attrs["probe_cost"]["charged_usd"] == 0.0
