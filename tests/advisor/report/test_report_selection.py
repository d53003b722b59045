"""One selection rule: the report's recommendation, ranking, fastest, cheapest and Pareto set
agree with each other on a replayed study (everything screened counts), and unit checks of
the tie rule and the Pareto thinning."""

from __future__ import annotations

import io
import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import pytest
from advisor.search_spaces.loader import default_space
from rich.console import Console

from advisor.evaluation.ranking import PARETO_MAX, TIE_SHARE, Point, pareto_set, rank, recommended
from advisor.evaluation.replay import ReplayBackend, ReplayTable
from advisor.options import SuggestOptions
from advisor.report.build import build_report
from advisor.report.render import render
from advisor.study.run import run_suggest
from advisor.study.selection import recommended_trial

SPACE = replace(default_space("fcn"), batch_sizes=(256, 512))


def _report(tmp_path: Path, table: ReplayTable, **kw: Any) -> dict[str, Any]:
    opts = SuggestOptions(model="fcn", space=SPACE, storage=f"sqlite:///{tmp_path / 's.db'}", **kw)
    outcome = run_suggest(opts, backend=ReplayBackend(table))
    return build_report(outcome)


def _key(row: dict[str, Any]) -> tuple[str, int]:
    return (row["machine"], row["batch_size"])


def _v(row: dict[str, Any], metric: str) -> float:
    return float(row[metric]["value"])


LIMITS = [
    pytest.param({"budget_usd": 5.0}, id="budget"),
    pytest.param({"deadline_s": 3600.0}, id="deadline"),
    pytest.param({"budget_usd": 1.0, "objective": "cost"}, id="cost"),
    pytest.param({"objective": "pareto"}, id="pareto"),
]


@pytest.mark.parametrize("limits", LIMITS)
def test_selection_invariants_on_a_replayed_study(
    tmp_path: Path, table: ReplayTable, limits: dict[str, Any]
) -> None:
    report = _report(tmp_path, table, **limits)
    ranking = report["ranking"]
    feasible = [r for r in ranking if r["feasible"]]
    # Everything screened is scored: 4 machines (2 with spot) x 2 batch sizes.
    assert report["ranking_total"] == len(ranking) == 12
    assert len({(_key(r), r["spot"]) for r in ranking}) == 12
    # Feasible rows come first.
    assert [r["feasible"] for r in ranking] == sorted(
        (r["feasible"] for r in ranking), reverse=True
    )
    rec = report["recommended"]
    assert rec is not None and rec["reason"]
    # The recommendation is ranking row 1 and lies in the ranking's first tie group.
    assert _key(ranking[0]) == _key(rec)
    if report["objective"] != "pareto":
        metric = "runtime_s" if report["objective"] == "time" else "cost_usd"
        best = min(_v(r, metric) for r in feasible)
        first_group = [r for r in feasible if _v(r, metric) <= best * (1 + TIE_SHARE)]
        assert _key(rec) in {_key(r) for r in first_group}
    else:
        assert _key(rec) in {_key(r) for r in report["pareto"]}
    # Fastest and cheapest: no ranked feasible row beats them.
    assert all(_v(report["best_by_time"], "runtime_s") <= _v(r, "runtime_s") for r in feasible)
    assert all(_v(report["best_by_cost"], "cost_usd") <= _v(r, "cost_usd") for r in feasible)
    # The Pareto set: sorted by time, each point more than the tie band cheaper than the one
    # before, small, and no scored point dominates one of its points.
    front = report["pareto"]
    assert 1 <= len(front) <= PARETO_MAX
    times = [_v(r, "runtime_s") for r in front]
    costs = [_v(r, "cost_usd") for r in front]
    assert times == sorted(times)
    assert all(b < a * (1 - TIE_SHARE) for a, b in itertools.pairwise(costs))
    for f in front:
        ft, fc = _v(f, "runtime_s"), _v(f, "cost_usd")
        assert f["feasible"]
        assert not any(
            _v(q, "runtime_s") <= ft
            and _v(q, "cost_usd") <= fc
            and (_key(q), q["spot"]) != (_key(f), f["spot"])
            and (
                _v(q, "runtime_s") < ft / (1 + TIE_SHARE)
                or _v(q, "cost_usd") < fc / (1 + TIE_SHARE)
            )
            for q in feasible
        )


def test_fastest_is_from_everything_screened_not_only_trials(
    tmp_path: Path, table: ReplayTable
) -> None:
    # With a 2 h deadline the study recommends the cheapest; "fastest" is still the fastest
    # screened machine (the 8-GPU one, 300 s), not the fastest machine a trial happened to run.
    report = _report(tmp_path, table, deadline_s=7200.0)
    fastest = report["best_by_time"]
    assert fastest["machine"] == "ec2:p3.16xlarge" and fastest["batch_size"] == 512
    assert report["recommended"]["reason"].startswith("cheapest within 2.00 h")


def test_recommended_trial_agrees_with_the_report(tmp_path: Path, table: ReplayTable) -> None:
    opts = SuggestOptions(
        model="fcn", space=SPACE, storage=f"sqlite:///{tmp_path / 's.db'}", budget_usd=5.0
    )
    outcome = run_suggest(opts, backend=ReplayBackend(table))
    report = build_report(outcome)
    t = recommended_trial(outcome.study)
    assert report["recommended"]["trial"] == t.number


def test_tie_rule_puts_the_cheapest_of_equally_fast_machines_first() -> None:
    # The case: thirteen machines at ~18 s costing 0.28-0.57 and a p4d at 18 s / 0.11.
    points = [Point(18.0 + i * 0.05, 0.28 + i * 0.02, True, f"m{i}") for i in range(13)]
    points.append(Point(18.3, 0.11, True, "p4d"))
    points.append(Point(25.0, 0.05, True, "t4"))
    ranked = rank(points, "time")
    assert ranked[0].ref == "p4d"
    assert recommended(points, "time") is ranked[0]
    assert ranked[-1].ref == "t4"  # outside the 5 % band: ranked by time, after the group


def test_pareto_set_is_thinned_by_the_tie_band() -> None:
    # 16 non-dominated points, most within 5 % of a neighbour: the set keeps few of them.
    points = [Point(100.0 * (1.01**i), 10.0 * (0.99**i), True, i) for i in range(16)]
    front = pareto_set(points)
    assert 2 <= len(front) <= 4
    assert [p.runtime for p in front] == sorted(p.runtime for p in front)
    # Dominated and infeasible points never enter.
    extra = [Point(50.0, 1.0, False, "over budget"), Point(200.0, 20.0, True, "dominated")]
    assert {p.ref for p in pareto_set(points + extra)} == {p.ref for p in front}


def test_pareto_set_is_capped_with_its_ends_kept() -> None:
    points = [Point(100.0 * (1.2**i), 10.0 * (0.8**i), True, i) for i in range(20)]
    front = pareto_set(points)
    assert len(front) == PARETO_MAX
    assert front[0].ref == 0 and front[-1].ref == 19


def test_rerunning_the_same_command_gives_the_same_answer(
    tmp_path: Path, table: ReplayTable
) -> None:
    first = _report(tmp_path, table, budget_usd=5.0)
    second = _report(tmp_path, table, budget_usd=5.0)
    assert second["resumed"] and not first["resumed"]
    assert second["trials"]["new"] == 0
    for key in ("recommended", "best_by_time", "best_by_cost", "pareto", "ranking"):
        assert second[key] == first[key], key


def test_report_lists_tuning_ranges_not_samples(tmp_path: Path, table: ReplayTable) -> None:
    report = _report(tmp_path, table, budget_usd=5.0)
    # fcn's lr, momentum, dropout and weight decay do not change the run time.
    assert set(report["tuned_ranges"]) == {"lr", "momentum", "dropout", "weight_decay"}
    assert report["tuned_ranges"]["lr"] == "0.01..0.3 log"
    assert report["recommended"]["hyperparameters"] == {}
    assert any("importance in the dashboard means nothing" in n for n in report["notes"])
    assert optuna.__version__  # the study ran through Optuna's own storage


def test_imported_managed_runs_are_a_table_never_the_recommendation(
    tmp_path: Path, table: ReplayTable
) -> None:
    from advisor.intervals import Interval
    from advisor.records import ManagedRun, TrialRecord

    opts = SuggestOptions(
        model="fcn", space=SPACE, storage=f"sqlite:///{tmp_path / 's.db'}", budget_usd=5.0
    )
    outcome = run_suggest(opts, backend=ReplayBackend(table))
    first = build_report(outcome)
    # A managed training job that ran faster and cheaper than anything scored.
    rec = TrialRecord(
        machine="ec2:p3.2xlarge", batch_size=512, source="managed", price_per_hour=3.06,
        spot=False, epochs=10, runtime=Interval.exact(60.0), cost=Interval.exact(0.05),
        feasible=False,
        managed=ManagedRun("sagemaker", "tj-1", "tj-1-001", "val_accuracy", 0.93, "completed",
                           "ml.p3.2xlarge", 70.0),
    )  # fmt: skip
    trial = outcome.study.trials[0]
    outcome.study.add_trial(
        optuna.trial.create_trial(
            params={"machine": "ec2:p3.2xlarge", "batch_size": 512},
            distributions={k: trial.distributions[k] for k in ("machine", "batch_size")},
            values=[60.0],
            user_attrs=rec.to_attrs(),
        )
    )
    report = build_report(outcome)
    assert report["recommended"] == first["recommended"]
    assert report["best_by_time"] == first["best_by_time"]
    assert [m["job"] for m in report["managed"]] == ["tj-1-001"]
    row = report["managed"][0]
    assert row["metric"] == {"name": "val_accuracy", "value": 0.93}
    assert row["runtime_s"]["value"] == 60.0 and row["status"] == "completed"
    assert recommended_trial(outcome.study).number != len(outcome.study.trials) - 1
    buf = io.StringIO()
    render(report, Console(file=buf, width=220), verbose=True)  # the full report
    text = buf.getvalue()
    assert "Managed tuning runs" in text and "tj-1-001" in text and "val_accuracy=0.93" in text


def test_the_probe_cache_is_no_study(tmp_path: Path) -> None:
    from advisor.errors import AdvisorError
    from advisor.evaluation.local import PROBE_CACHE_STUDY
    from advisor.report import dashboard as dashboard_view
    from advisor.study import selection

    # The name is spelt in three places (no import of the local back end where unneeded).
    assert selection.PROBE_CACHE_STUDY == PROBE_CACHE_STUDY
    assert dashboard_view.HIDDEN_STUDIES == (PROBE_CACHE_STUDY,)
    study = optuna.create_study(study_name=PROBE_CACHE_STUDY)
    with pytest.raises(AdvisorError, match="is the probe cache, not a study"):
        recommended_trial(study)
