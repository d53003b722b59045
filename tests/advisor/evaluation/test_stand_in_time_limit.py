"""suggest's check before a local probe skips it for time only when the step is hopeless.

``advisor predict`` traces without a local timing any step whose lower bound (FLOPs at this
CPU's measured product rate) is over 5 s; suggest's screen must not: that rate moves with the
machine's load, and fcn at batch 2048 lost its row on a busy machine ("at least 6 s a step").
"""

from __future__ import annotations

import pytest
from advisor.probes.operators import feasibility, trace_workload

from advisor.evaluation.memory_checks import SUGGEST_MAX_STEP_S, StandIns
from advisor.evaluation.untimed import decide
from advisor.evaluation.workload import WorkloadInfo

pytest.importorskip("torch")


def _rate_for(step_s: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """This CPU's product rate set so that fcn's step at batch 2048 takes ``step_s``."""
    flops = trace_workload("fcn", 2048, "torch", {}, mode="meta").flops
    monkeypatch.setattr(feasibility, "measured_cpu_flops_per_s", lambda: flops / step_s)


def test_a_six_second_step_is_probed_by_suggest_but_not_by_predict(monkeypatch):
    _rate_for(6.0, monkeypatch)
    fcn = WorkloadInfo(name="fcn", n_train=1000)
    assert StandIns().probeable(fcn, 2048, {})
    verdict = decide("fcn", 2048, "torch", {})
    assert verdict is not None and not verdict.feasible and "limit 5 s" in verdict.reason


def test_a_step_over_the_suggest_limit_gets_the_stand_in(monkeypatch):
    _rate_for(2 * SUGGEST_MAX_STEP_S, monkeypatch)
    assert not StandIns().probeable(WorkloadInfo(name="fcn", n_train=1000), 2048, {})
