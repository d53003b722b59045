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
