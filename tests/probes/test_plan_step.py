"""The step under a plan (``probes.plan_step``), as traced on fake tensors (stop 64)."""

from __future__ import annotations

from pathlib import Path

import pytest
from advisor.probes.operators.peak_lines import HOLDERS
from advisor.probes.operators.plan_peak import trace_plan_peak

from advisor.prediction.step.plan import parse_plan

DEEP = "trace_user_models:deep_mini"


@pytest.fixture(autouse=True)
def _repo_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/ (deep_mini's blocks) found from the repository root."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))


@pytest.mark.parametrize("text", ["checkpointing=blocks", "precision=bf16,checkpointing=blocks"])
def test_checkpointed_blocks_hold_one_input_a_block_under_autocast_too(text: str) -> None:
    """Under checkpointed blocks the forward pass keeps each block's input (64 x 128 float32
    values a sample: 65,536 bytes at micro-batch 2) and nothing else a block: bf16 as float32.
    Autocast's cache of weight copies, which lives until autocast exits, is off there; on, it
    kept every block's bf16 weights too (461,056 bytes a block, stop 64)."""
    at = HOLDERS.index("activations")
    held = [
        max(t[at] for t in trace_plan_peak(DEEP, 2, parse_plan(text), {"layers": n}).timeline)
        for n in (4, 8)
    ]
    assert (held[1] - held[0]) / 4 == 2 * 64 * 128 * 4
