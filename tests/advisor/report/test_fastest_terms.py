"""Issue #47: the report's fastest line names the multi-GPU terms that decided its step."""

from __future__ import annotations

from advisor.providers.catalog import load
from perf_fixtures import SyntheticTraces, gpu_machine, traced_probe

from advisor.prediction.timing.model import predict
from advisor.report.summary import step_text


def test_a_multi_gpu_rows_terms_are_carried_and_said() -> None:
    p = traced_probe(batch=512, width=1024, layers=4)
    machine = gpu_machine("p3x8", "V100", 8, 24.48)
    pred = predict(p, machine, load(), 512, trace_store=SyntheticTraces(width=1024, layers=4))
    terms = pred.step_terms()
    assert terms is not None and terms["devices"] == 8
    assert terms["allreduce"] > 0 and terms["t2"] >= terms["device"]
    text = step_text(terms)
    assert "on 8 devices" in text and "all-reduce" in text and "host dispatch" in text


def test_one_device_or_a_cpu_says_nothing_more() -> None:
    assert step_text(None) == ""
    one = {"devices": 1.0, "t2": 1.0, "device": 1.0, "dispatch": 0.1, "input": 0.1,
           "allreduce": 0.0, "replica": 0.0}  # fmt: skip
    assert step_text(one) == ""
