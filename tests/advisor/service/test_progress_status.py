"""A job's status carries the stage's words and the time left at its measured rate (issue #50),
as the CLI shows them: what a client polling ``/v1/jobs/{id}`` reads in ``progress``."""

from __future__ import annotations

from short_runs import Clock

from advisor.progress import Meter
from advisor.service.fencing import Lease
from advisor.service.runner import LeaseKeeper


def test_the_job_progress_says_the_stage_and_what_is_left() -> None:
    keeper = LeaseKeeper("sqlite:///unused.db", Lease("job-1", 1), every_s=1.0)  # not started
    clock = Clock()
    keeper.meter = Meter(clock)
    keeper.report("screen", 0, 400)
    assert keeper.progress["left"] == "estimating..." and keeper.progress["left_s"] is None
    clock.t = 20.0
    keeper.report("screen", 100, 400)
    assert keeper.progress == {
        "phase": "screen", "done": 100, "total": 400,
        "label": "screening 400 machine x batch pairs (a local probe per new batch size)",
        "elapsed_s": 20.0, "left_s": 60.0, "left": "about 1.0 min left",
    }  # fmt: skip


def test_a_jobs_progress_carries_its_first_answer_until_the_end() -> None:
    """Issue #46: the first answer the pipeline hears goes with every later progress, as the
    block ``advisor suggest`` prints (the recommendation and the next rows), nothing more."""
    keeper = LeaseKeeper("sqlite:///unused.db", Lease("job-1", 1), every_s=1.0)  # not started
    row = {"machine": "ec2:g4dn.xlarge:spot", "batch_size": 1024, "epochs": 14,
           "runtime_s": {"value": 160.0, "low": 60.0, "high": 490.0},
           "cost_usd": {"value": 0.01, "low": 0.004, "high": 0.03}}  # fmt: skip
    other = {**row, "machine": "ec2:g4dn.2xlarge:spot"}
    keeper.report("screen", 0, 400)
    keeper.heard_first({"recommended": row, "ranking": [row, other], "wall_s": 3.0})
    keeper.report("screen", 10, 400)
    shown = keeper.progress["first_answer"]
    assert shown["recommended"]["machine"] == "ec2:g4dn.xlarge:spot"
    assert [r["machine"] for r in shown["ranking"]] == ["ec2:g4dn.2xlarge:spot"]
    assert "epochs" not in shown["recommended"] and keeper.progress["done"] == 10
    none = LeaseKeeper("sqlite:///unused.db", Lease("job-2", 1), every_s=1.0)
    none.heard_first({"recommended": None})  # no GPU machine fits: nothing to show
    none.report("screen", 1, 400)
    assert "first_answer" not in none.progress


def test_the_client_shows_a_jobs_first_answer_once(monkeypatch: object) -> None:
    from advisor.service.client import Client

    block = {"recommended": {"machine": "m"}, "ranking": []}
    polls = iter([
        {"status": "running", "progress": {"phase": "screen", "done": 0, "total": 4}},
        {"status": "running", "progress": {"phase": "screen", "done": 1, "total": 4,
                                           "first_answer": block}},
        {"status": "running", "progress": {"phase": "trials", "done": 2, "total": 4,
                                           "first_answer": block}},
        {"status": "done", "result": {"recommended": {"machine": "m"}}},
    ])  # fmt: skip
    client = Client("http://unused", "a-token")
    client.job = lambda job_id: next(polls)  # type: ignore[method-assign]
    heard: list[dict[str, object]] = []
    result = client.wait("job-1", poll_s=0.0, first_answer=heard.append)
    assert heard == [block] and result == {"recommended": {"machine": "m"}}


def test_a_progress_report_after_the_lease_was_lost_stops_the_run() -> None:
    """The progress callback is where the run hears that its lease went to another worker."""
    import pytest

    from advisor.service.fencing import LeaseLost

    keeper = LeaseKeeper("sqlite:///unused.db", Lease("job-3", 1), every_s=1.0)  # not started
    keeper.report("screen", 1, 400)
    keeper.lost.set()
    with pytest.raises(LeaseLost):
        keeper.report("screen", 2, 400)
