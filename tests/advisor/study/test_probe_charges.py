"""Issue #27: only what ran is charged. Without --cloud-probes the local back end runs no probe
on a cloud machine: its trials (modelled there, or this machine's free probe) charge nothing,
the search stops because it converged -- not on a probe budget spent by probes that never
ran -- and the report says so. The replay back end, whose rows stand for probes run on each
machine, still charges them once per machine and batch.

The local probes are fakes with fixed timings (no torch); the screen, the performance model,
the planner, the trial loop and the report are the real ones."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import optuna
import pytest
from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.providers.catalog import load
from advisor.search_spaces.loader import default_space
from advisor.search_spaces.space import MachineFilter
from perf_fixtures import with_synthetic_trace

from advisor.evaluation.local import LocalBackend
from advisor.evaluation.replay import ReplayBackend, ReplayEntry, ReplayTable
from advisor.intervals import Interval
from advisor.options import SuggestOptions, workload_info
from advisor.records import TrialRecord
from advisor.report.build import build_report
from advisor.study.run import run_suggest

CLOUD = ("ec2:g5.xlarge", "ec2:g4dn.xlarge", "ec2:g6.xlarge", "compute-engine:g2-standard-4")
# issue #26: a probe made ready for prediction (its operator trace and loader time), so
# no trace is taken here (no torch import)
TRACE = {"data_s": 0.004}


def _probe(request: ProbeRequest) -> ProbeResult:
    step = 0.1 * request.batch_size / 256
    return with_synthetic_trace(ProbeResult(
        workload="fcn", framework="torch", batch_size=request.batch_size, device="cpu",
        threads=1, init_s=1.0, iteration_s=(step * 5, *([step] * 7)), validation_s=(0.2, 0.1),
        validation_samples_measured=212, n_train=40_512, n_val=212, wall_s=3.0,
        fingerprint=dict(TRACE),
    ))  # fmt: skip


def _suggest(tmp_path: Path, machines: tuple[str, ...] = CLOUD, **fields: Any) -> Any:
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    space = dataclasses.replace(
        default_space("fcn"), machines=MachineFilter(instance_types=machines, spot=True)
    )
    backend = LocalBackend(storage, run_probe=_probe)
    options = SuggestOptions(model="fcn", space=space, storage=storage, **fields)
    return run_suggest(options, backend)


def _records(outcome: Any) -> list[TrialRecord]:
    done = outcome.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    return [r for t in done if (r := TrialRecord.from_trial(t)) is not None]


def test_modelled_trials_charge_nothing_and_the_search_converges(tmp_path: Path) -> None:
    o = _suggest(tmp_path, budget_usd=5)
    records = _records(o)
    assert records and all(r.probe_charged_usd == 0 for r in records)
    assert o.probe_spent_usd == 0.0
    # A trial repeats its screen here, so once the best trial ranks above every
    # configuration left there is nothing to learn: converged, after a handful of trials.
    assert o.stop_reason == "converged"
    assert o.new_trials <= 2
    report = build_report(o)
    assert report["probes"]["spent_usd"] == 0.0
    assert "modelled trials cost nothing" in report["probes"]["charged_for"]
    note = next(n for n in report["notes"] if n.startswith("Probe budget: USD 0.0000 of 0.5"))
    assert "modelled trial(s) charged nothing" in note
    # The recommendation is a trial (what advisor submit takes), and row 1 of the ranking.
    rec = report["recommended"]
    assert rec["trial"] is not None and report["ranking"][0]["machine"] == rec["machine"]
    assert rec["charged_usd"] == 0.0


def test_every_row_says_how_its_figures_were_obtained(tmp_path: Path) -> None:
    report = build_report(_suggest(tmp_path, budget_usd=5))
    rows = report["ranking"]
    assert {r["known"] for r in rows} == {"here", "model"}
    for r in rows:
        # No row is "measured": a probe times a few iterations, the run is extrapolated.
        assert "measured" not in r["source"]
        expected = "probed here, extrapolated" if r["service"] == "local" else "modelled"
        assert r["source"].split(", screen only")[0] == expected, r["source"]
        # each price says whether it was read out or estimated, with its source and date
        if r["service"] == "local":
            assert r["price_basis"] == "given"
        else:
            inst = load().get(r["machine"].removesuffix(":spot"))
            assert r["price_basis"] == inst.basis(r["spot"]) in ("read-out", "estimate")
            assert r["price_source"] == inst.source and r["price_date"] == inst.price_date
    legend = report["known_legend"]
    assert legend["here"].startswith("probed here, extrapolated")
    assert legend["model"].startswith("modelled") and "charged nothing" in legend["model"]


def test_a_tiny_probe_budget_no_longer_stops_the_search(tmp_path: Path) -> None:
    # Before: each modelled trial was charged its predicted probe time x list price, so a
    # budget of USD 0.0001 stopped the search ("probe budget spent") and pruned the rest.
    o = _suggest(tmp_path, budget_usd=5, probe_budget_usd=0.0001)
    assert o.stop_reason == "converged" and o.probe_spent_usd == 0.0
    states = [t.state for t in o.study.get_trials(deepcopy=False)]
    assert optuna.trial.TrialState.PRUNED not in states


def test_a_pareto_search_tries_the_predicted_front_and_stops(tmp_path: Path) -> None:
    o = _suggest(tmp_path, objective="pareto")
    assert o.stop_reason == "converged" and o.probe_spent_usd == 0.0
    report = build_report(o)
    front = {(p["machine"], p["batch_size"]) for p in report["pareto"]}
    tried = {(r.machine, r.batch_size) for r in _records(o)}
    assert front <= tried  # every front point is a trial (advisor submit can take the knee)


def test_the_replay_back_end_still_charges_its_probes_once(tmp_path: Path) -> None:
    # Its rows stand for probes run on each machine: charged at that machine's price.
    cat = load()
    insts = (cat.get("ec2:g5.xlarge"), cat.get("ec2:g4dn.xlarge"))
    entries = tuple(
        ReplayEntry(i.key, b, Interval(300.0, 280.0, 900.0), probe_s=60.0)
        for i in insts
        for b in (256, 512)
    )
    backend = ReplayBackend(ReplayTable(insts, entries, snapshot="replay", epochs=10))
    space = dataclasses.replace(
        default_space("fcn"),
        batch_sizes=(256, 512),
        machines=MachineFilter(spot=False, include_local=False),
    )
    wl = workload_info(SuggestOptions(model="fcn"))
    for cand in backend.candidates(space):
        ev = backend.evaluate(wl, cand, 256, {})
        assert ev.probe_cost_usd == pytest.approx(60.0 * cand.price_per_hour / 3600)
    storage = optuna.storages.InMemoryStorage()
    o = run_suggest(
        SuggestOptions(model="fcn", space=space, screen=False, trials=4, budget_usd=50),
        backend,
        storage=storage,
    )
    charged = [r.probe_charged_usd for r in _records(o)]
    assert o.probe_spent_usd == pytest.approx(sum(charged)) and o.probe_spent_usd > 0
