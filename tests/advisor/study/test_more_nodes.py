"""Issue #49's hint under ``--max-nodes 1`` (``advisor.study.more_nodes``): the rows on 2, 4 and
8 machines are scored with the state replicated across machines (issue #46), so their memory
is one machine's at the per-GPU batch: no step sharded over more GPUs than one machine has is
ever traced for them. ``memory_fixtures``' terms, here with parameters and gradients sharded
over the ranks under ZeRO-3 (so sharding is what makes a big per-GPU batch fit), on a wide
MLP's kernels; scored by the real scorer (``LocalBackend``) through the Python API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import memory_fixtures
import pytest
from memory_fixtures import MODEL, PER_SAMPLE, REPLICA, wide_study

import advisor

fresh_memos = memory_fixtures.fresh_memos  # autouse: the memos forgotten around each test
MACHINE = "ec2:g5.48xlarge"  # 8 x A10G (24 GB), a cited network figure


def _lines(asked: list[tuple[int, str]]) -> Any:
    """``memory_fixtures.sized_lines``, its replica divided over the ranks under ZeRO-3, and
    each (replicas, sharding) asked recorded in ``asked``."""
    from advisor.probes.operators.peak_lines import PeakLines

    def lines(workload: str, plan: Any, *_: Any, replicas: int = 1, sharding: str = "none",
              **__: Any) -> Any:  # fmt: skip
        asked.append((replicas, sharding))
        shard = replicas if sharding == "parameters" else 1
        at = [(REPLICA // shard, 0, REPLICA // shard, 0, PER_SAMPLE * b, 0, 0) for b in (2, 4)]
        return PeakLines(2, 4, ((at[0], at[1]),), 0, ("sized's step, ZeRO-3 sharded",))

    return lines


@pytest.mark.slow  # about 10 s: a small study with the kernel model and its hint
def test_the_hint_on_several_machines_traces_no_step_sharded_over_them(tmp_path: Path) -> None:
    from advisor.probes.operators import plan_peak

    asked: list[tuple[int, str]] = []
    url, space, backend = wide_study(tmp_path, 256, [MACHINE])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan_peak, "peak_lines", _lines(asked))
        report = advisor.suggest(
            model=MODEL, space=space, n_train=200_000, n_val=100, budget_usd=1e6, local=False,
            storage=url, backend=backend, spot=False, precision="fp32",
        )  # fmt: skip
    assert report["recommended"]["machine"] == MACHINE
    assert {s for _, s in asked} > {"none"}  # sharded plans were searched
    assert max(n for n, _ in asked) <= 8  # one machine's GPUs, never 16 to 64
    assert backend.settings.plan_fields == {}  # the hint's setting undone
    better = report["nodes"]["better"]  # 4 machines: faster, dearer (sharding across: +1 %)
    assert better and all(row["nodes"] > 1 for row in better)
    assert better[0]["runtime_s"] < report["recommended"]["runtime_s"]["value"]
