"""Issue #46: a builder that declares its depth (``blocks``, ``layers=``) has its plan memory
carried from traces of 4 and 6 blocks; the carried peak is the whole trace's."""

from __future__ import annotations

from pathlib import Path

import pytest
from advisor.probes.operators.layer_scaling import declared_depth
from advisor.probes.operators.peak_lines import TRACED_BATCHES, PeakLines, envelope
from advisor.probes.operators.plan_peak import lines_here, trace_plan_peak

from advisor.prediction.step.plan import parse_plan

DEEP = "trace_user_models:deep_mini"
ROOT = Path(__file__).resolve().parents[3]


def test_only_a_deep_declared_builder_is_carried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ is found as the worker finds it: from here
    assert declared_depth(DEEP, {}) == 8
    assert declared_depth(DEEP, {"layers": 8}) is None  # fixed by the user: traced whole
    assert declared_depth("examples.transformers:gpt2_mini", {}) is None  # declares nothing
    assert declared_depth("examples.transformers:gpt2_large", None) == 36
    assert declared_depth("fcn", {}) is None


@pytest.mark.slow  # about 60 s: each plan traced whole and at 4 and 6 blocks
@pytest.mark.parametrize(
    "text, carried",
    [("", True), ("checkpointing=blocks", True), ("precision=bf16,accumulation=2", False)],
)
def test_the_carried_peak_is_the_whole_traces(text: str, carried: bool) -> None:
    """Carried where the two shallow traces' peak moments correspond; where they do not (bf16
    under accumulation: 2 moments at 4 blocks, 3 from 6 on), the model is traced whole."""
    plan = parse_plan(text)
    low, high = TRACED_BATCHES
    a, b = (trace_plan_peak(DEEP, m, plan, {"layers": 8}) for m in (low, high))
    whole = PeakLines(low, high, envelope(a.timeline, b.timeline, high - low), a.state)
    got = lines_here(DEEP, plan, {})
    assert any("carried" in n for n in got.notes) is carried, got.notes
    for micro in (1, 4, 16):
        want, have = sum(whole.at(micro).values()), sum(got.at(micro).values())
        assert abs(have / want - 1) < 0.01, (text, micro, have, want)
