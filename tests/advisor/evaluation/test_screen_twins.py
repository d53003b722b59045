"""A spot candidate is screened from its on-demand twin's run time: the model runs once per
machine and batch, not once per offer, and the twin's new probe is counted once (issue #33:
the screen's CPU). Through the Python API with a replay back end that counts its model calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisor.search_spaces.loader import load_space

import advisor
from advisor.evaluation.replay import ReplayBackend

from ..cli.conftest import table


class CountingScreen(ReplayBackend):
    """The replay back end, counting the machines and batches its model is asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked: list[tuple[str, int]] = []

    def _screen(self, workload: Any, instance: Any, batch_size: int, hps: Any) -> Any:
        self.asked.append((instance.key, batch_size))
        return super()._screen(workload, instance, batch_size, hps)


def test_a_spot_twin_reuses_its_on_demand_screen(tmp_path: Path) -> None:
    backend = CountingScreen(table())
    report = advisor.suggest(
        model="fcn",
        budget_usd=5,
        space=load_space("workload: fcn\nbatch_sizes: [256, 512]\n"),
        backend=backend,
        storage=f"sqlite:///{tmp_path / 's.db'}",
    )
    rows = {(r[0], r[1]): r for r in report["points"]}
    spot = [key for key in rows if key[0].endswith(":spot")]
    assert spot, "the replay table's machines are sold on spot too"
    # each machine and batch modelled once, whether offered on demand, on spot or both
    assert len(backend.asked) == len(set(backend.asked)) == len(rows) - len(spot)
