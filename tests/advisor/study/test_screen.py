"""Issue #46: the screen searches a pair's training plans only where the pair could still beat
a row that fits (``advisor.study.screen``). ``memory_fixtures``' memory terms (32 GiB at batch
8) on a wide MLP's kernels (compute-bound): its plain plan fits neither a 24 GB A10G nor a
12 GB K80; the A10G's plan search finds a plan that fits, and the K80 (several times slower,
nearly as dear by the hour) is then beaten on time and cost by that row before its own
search: its plans are never searched. Scored by the real scorer (``LocalBackend``) through the
Python API, on fake local probes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import memory_fixtures
import pytest
from memory_fixtures import MODEL, wide_study

import advisor
from advisor.errors import AdvisorError
from advisor.evaluation.contract import Evaluation
from advisor.study.screen import Front

fresh_memos = memory_fixtures.fresh_memos  # autouse: the memos forgotten around each test
A10G, K80 = "ec2:g5.xlarge", "ec2:p2.xlarge"


def _row(machine: str, seconds: float, usd: float) -> Evaluation:
    from advisor.intervals import Interval

    return Evaluation(machine=machine, batch_size=8, source="modelled", epochs=1,
                      price_per_hour=1.0, spot=False, probe_s=0.0,
                      runtime=Interval.exact(seconds), cost=Interval.exact(usd))  # fmt: skip


def test_the_front_keeps_the_rows_no_other_beats_on_both() -> None:
    front = Front([_row("a", 10, 5), _row("b", 20, 2), _row("c", 30, 6)])  # c: beaten by a
    assert [r.machine for r in front.rows] == ["a", "b"]
    assert front.beater(_row("x", 25, 3)).machine == "b"  # type: ignore[union-attr]
    assert front.beater(_row("y", 15, 3)) is None  # faster than b, cheaper than a
    assert front.beater(_row("z", 10, 6)) is None  # a ties on time: not beaten on both
    front.add(_row("d", 5, 1))  # beats both: the only one kept
    assert [r.machine for r in front.rows] == ["d"]


def _suggest(tmp_path: Path, machines: list[str], searched: list[tuple[str, str]]) -> Any:
    """The report of a suggest over ``machines`` at batch 8, float32, recording in
    ``searched`` each (machine, mode) the plan search was asked for."""

    from advisor.prediction.forecast import plan_search

    real = plan_search.best_forecast

    def recorded(probe: Any, machine: Any, *args: Any, **kw: Any) -> Any:
        searched.append((machine.key, kw.get("mode", "search")))
        return real(probe, machine, *args, **kw)

    url, space, backend = wide_study(tmp_path, 8, machines)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan_search, "best_forecast", recorded)

        report = advisor.suggest(
            model=MODEL, space=space, n_train=200_000, n_val=100, budget_usd=1e6, local=False,
            storage=url, backend=backend, spot=False, precision="fp32",
            include_previous_generation=True,
        )  # fmt: skip
    return report, backend


@pytest.mark.slow  # about 10 s: two small studies with the kernel model
def test_a_pair_beaten_before_its_plan_search_is_not_searched(tmp_path: Path) -> None:
    searched: list[tuple[str, str]] = []
    report, _ = _suggest(tmp_path / "both", [A10G, K80], searched)
    assert (A10G, "search") in searched  # its plain plan does not fit: its plans searched
    assert (K80, "bound") in searched and (K80, "search") not in searched
    rec = report["recommended"]
    assert rec["machine"] == A10G and rec["training_plan"]["accumulation"] > 1
    out = report["memory_left_out"]
    assert out["count"] == 0 and out["beaten"] == 1 and out["beaten_pairs"] == [f"{K80} b8"]
    assert out["text"].startswith("Not searched: 1 of 2 pairs") and A10G in out["text"]

    # what the K80's own search, alone, finds: a plan slower and dearer, or none that fits
    alone: list[tuple[str, str]] = []
    try:
        k80, _ = _suggest(tmp_path / "k80", [K80], alone)
    except AdvisorError as exc:  # no plan fits it: left out either way
        assert "cannot hold a step in their memory" in str(exc)
    else:
        row = k80["recommended"]
        assert row["runtime_s"]["value"] > rec["runtime_s"]["value"]
        assert row["cost_usd"]["value"] > rec["cost_usd"]["value"]
    assert (K80, "search") in alone


def test_a_back_end_without_plans_is_screened_once(tmp_path: Path) -> None:
    """The replay back end predicts one way: no bound, no second pass."""
    from advisor.search_spaces.loader import load_space

    from advisor.evaluation.replay import ReplayBackend

    from ..cli.conftest import table

    asked: list[str] = []

    class Counting(ReplayBackend):
        def screen(self, *args: Any, **kw: Any) -> Any:
            asked.append(args[4] if len(args) > 4 else kw.get("mode", "search"))
            return super().screen(*args, **kw)

    report = advisor.suggest(
        model="fcn", budget_usd=5, space=load_space("workload: fcn\nbatch_sizes: [256]\n"),
        backend=Counting(table()), storage=f"sqlite:///{tmp_path / 's.db'}",
    )  # fmt: skip
    assert report["recommended"] is not None
    assert asked and set(asked) == {"search"}


def test_a_search_stops_only_where_every_offer_of_the_machine_is_beaten(tmp_path: Path) -> None:
    """Issue #48: the on-demand and spot offers of a machine share one plan search, so the
    screen's stop (``Outpaced``) holds only where the run is beaten on time and cost for
    both, each priced as its rows are (``Backend.priced``); the row then says its search
    stopped, and why."""
    from advisor.evaluation.candidates import Candidate
    from advisor.evaluation.contract import FailedEvaluation
    from advisor.intervals import Interval
    from advisor.study.screen import Outpaced, beaten

    _, _, backend = wide_study(tmp_path, 8, [A10G])
    a10g = backend.catalog.get(A10G)
    offers = [Candidate(a10g), Candidate(a10g, spot=True)]
    hour = Interval.exact(3600.0)
    on_demand, spot = (backend.priced(c, 8, hour, 1) for c in offers)
    assert isinstance(on_demand, Evaluation) and isinstance(spot, Evaluation)
    assert spot.cost.value < on_demand.cost.value  # spot: cheaper, and no faster

    def stop(*rows: Evaluation) -> Outpaced:
        return Outpaced(Front(rows), backend, None, offers, 8, 1)  # type: ignore[arg-type]

    under_both = _row("fits", 60, spot.cost.value / 2)
    found = stop(under_both)
    assert not found.cut
    assert found(hour) and set(found.cut) == {c.key for c in offers}
    assert found.cut[offers[1].key][0].cost.value == pytest.approx(spot.cost.value)
    between = _row("fits", 60, (spot.cost.value + on_demand.cost.value) / 2)
    assert not stop(between)(hour)  # the spot offer is cheaper than it: the search goes on
    assert not stop(under_both)(Interval.exact(1.0))  # a run of a second beats the row's minute

    row = FailedEvaluation(machine=offers[0].key, batch_size=8, source="modelled", epochs=1,
                           price_per_hour=1.0, spot=False, probe_s=0.0,
                           error="does not fit: needs 30.0 GiB per GPU, has 21.7")  # fmt: skip
    said = beaten(row, *found.cut[offers[0].key], during=True)
    assert "its search stopped, no plan fitting yet" in str(said.error)
    assert said.estimate["beaten_by"] == {"machine": "fits", "batch_size": 8,
                                          "during_search": True}  # fmt: skip
