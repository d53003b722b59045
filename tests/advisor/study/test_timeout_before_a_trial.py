"""Issue #28: --timeout reached before the first trial says so, not "no candidate fits a
budget ... raise --budget to at least 0.00". Through the Python API: the CLI cannot make the
screen slow on purpose (the back end here sleeps in its screen as local probes would)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from advisor.search_spaces.loader import load_space

import advisor
from advisor.errors import AdvisorError
from advisor.evaluation.replay import ReplayBackend

from ..cli.conftest import table


class SlowScreen(ReplayBackend):
    """A replay back end whose screen takes 0.4 s per machine x batch (a probe's worth)."""

    def _screen(self, *args: Any) -> Any:
        time.sleep(0.4)
        return super()._screen(*args)


def test_a_timeout_before_the_first_trial_says_to_rerun_or_give_more_time(
    tmp_path: Path,
) -> None:
    space = load_space("workload: fcn\nbatch_sizes: [256, 512]\n")
    with pytest.raises(AdvisorError) as caught:
        advisor.suggest(
            model="fcn",
            budget_usd=5,
            timeout_s=0.5,
            space=space,
            backend=SlowScreen(table()),
            storage=f"sqlite:///{tmp_path / 's.db'}",
        )
    text = str(caught.value)
    assert "--timeout 0.5 s ran out while screening" in text, text
    assert "re-run the same command" in text and "raise --budget" not in text
