"""Issue #48: a deep model's steps at the screen's per-GPU batches are traced side by side in
the two isolated workers before the screen reads them one at a time
(``advisor.prediction.step.traces.trace_ahead``), and each is then read, not traced again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import memory_fixtures
import pytest
from advisor.probes import isolated
from memory_fixtures import MODEL, wide_study

import advisor
from advisor.prediction.memo import forget_all
from advisor.prediction.step import traces

SMALL = "hf:meta-llama/Llama-3.1-8B,method=lora,layers=1,vocab=512,seq_len=32"
fresh_memos = memory_fixtures.fresh_memos  # autouse: the memos forgotten around each test


class Store:
    def __init__(self) -> None:
        self.kept: dict[str, Any] = {}

    def get_trace(self, key: str) -> Any:
        return self.kept.get(key)

    def put_trace(self, key: str, trace: Any) -> None:
        self.kept[key] = trace


@pytest.mark.slow  # two small Llama steps traced in the workers, one here (about 15 s)
def test_an_hf_models_steps_are_traced_side_by_side_and_then_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(isolated, "slots", lambda: 2)
    sent: list[int] = []
    real_each = isolated.call_isolated_each

    def each(calls: Any, **kw: Any) -> Any:
        sent.append(len(calls))
        return real_each(calls, **kw)

    monkeypatch.setattr(isolated, "call_isolated_each", each)
    store = Store()
    told: list[int] = []
    assert traces.trace_ahead(SMALL, "torch", [2, 4, 4, 0], store, told.append) == 2
    assert sent == [2]  # one round: both batches side by side
    assert told == [2]  # the progress hears how many before they start
    assert set(store.kept) == {traces.trace_key(SMALL, "torch", b, {}) for b in (2, 4)}
    assert traces.trace_ahead(SMALL, "torch", [2, 4], store, told.append) == 0  # held
    assert told == [2]  # nothing traced: nothing said

    from advisor.evaluation.untimed import decide

    key = traces.trace_key(SMALL, "torch", 4, {})
    decision = decide(SMALL, 4)  # the screen's first question reads the trace taken ahead
    assert decision is not None and decision.trace is store.kept[key]

    # the trace taken ahead is the trace this process takes of the same step
    forget_all()
    monkeypatch.undo()
    from advisor.probes.operators.workload import trace_here

    here = trace_here(SMALL, 4, "torch", {}, "meta")
    ahead = store.kept[traces.trace_key(SMALL, "torch", 4, {})]
    assert ahead.operators == here.operators and ahead.memory_bytes == here.memory_bytes
    assert ahead.peak_memory == here.peak_memory and ahead.parameters == here.parameters


def test_other_models_are_traced_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolated, "slots", lambda: 2)
    monkeypatch.setattr(isolated, "call_isolated_each", lambda *a, **k: pytest.fail("traced"))
    said: list[int] = []
    assert traces.trace_ahead("fcn", "torch", [2, 4], None, said.append) == 0  # a built-in
    assert not said  # its progress never claims a trace side by side
    assert traces.trace_ahead(SMALL, "keras", [2, 4]) == 0


def test_a_failed_trace_ahead_keeps_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolated, "slots", lambda: 2)

    def fails(*_: Any, **__: Any) -> Any:
        raise RuntimeError("no meta kernel for aten::something")

    monkeypatch.setattr(isolated, "call_isolated_each", fails)
    store = Store()
    assert traces.trace_ahead(SMALL, "torch", [2, 4], store) == 0 and not store.kept
    assert traces.remembered(traces.trace_key(SMALL, "torch", 2, {})) is None


def test_a_trace_ahead_that_timed_out_is_said_now_not_waited_for_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(isolated, "slots", lambda: 2)
    for kind in ("timeout", "memory"):

        def fails(*_: Any, kind: str = kind, **__: Any) -> Any:
            raise isolated.UserCodeError(f"--model {SMALL} ran past 300 s", "", kind)

        monkeypatch.setattr(isolated, "call_isolated_each", fails)
        if kind == "timeout":
            with pytest.raises(isolated.UserCodeError):
                traces.trace_ahead(SMALL, "torch", [2, 4])
        else:  # one at a time, each may fit in its worker's share of memory
            assert traces.trace_ahead(SMALL, "torch", [2, 4]) == 0


def test_the_screen_asks_for_every_per_gpu_batch_before_its_first_pair(tmp_path: Path) -> None:
    """Through the Python API: one machine of one GPU and one of eight at batch 8 read the
    steps at 8 and 1 (and this machine's probe, 8): asked for once, before any pair."""
    asked: list[list[int]] = []
    url, space, backend = wide_study(tmp_path, 8, ["ec2:g5.xlarge", "ec2:p4d.24xlarge"])
    backend.trace_ahead = lambda workload, batches, starting: asked.append(list(batches))
    advisor.suggest(model=MODEL, space=space, n_train=200_000, n_val=100, budget_usd=1e6,
                    local=False, storage=url, backend=backend, spot=False, precision="fp32",
                    include_previous_generation=True)  # fmt: skip
    assert asked == [[1, 8]]
