"""Issue #50: ``advisor.probes.isolated.call_isolated`` runs a function in one reusable worker
process; what the worker cannot answer is one ``UserCodeError`` line. The CLI's view of the
same, with hostile models: ``tests/e2e/test_user_code_at_arms_length.py``."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator

import pytest
from advisor.probes import isolated
from advisor.probes.isolated import UserCodeError, call_isolated, time_limit
from hostile_models import hog, kill_self, pid, raise_value_error

pytestmark = pytest.mark.slow  # a worker process with PyTorch imported: seconds each


@pytest.fixture
def fresh_worker() -> Iterator[None]:
    """A worker of this test's own (and none left running after it)."""
    isolated.shutdown()
    yield
    isolated.shutdown()


def test_one_worker_answers_many_calls_and_raises_their_exceptions(fresh_worker: None) -> None:
    first = call_isolated(pid)
    assert first != os.getpid()  # not here
    assert call_isolated(pid) == first  # reused: PyTorch is imported once
    assert call_isolated(sorted, [3, 1, 2]) == [1, 2, 3]
    with pytest.raises(ValueError, match="shapes do not match"):  # its own type, here
        call_isolated(raise_value_error, "shapes do not match")
    assert call_isolated(pid) == first  # an exception leaves the worker as it was


def test_an_exit_a_crash_or_a_hang_is_one_line_and_the_worker_is_replaced(
    fresh_worker: None,
) -> None:
    before = call_isolated(pid)
    with pytest.raises(UserCodeError, match=r"^--model m:f .*exit code 3 .* To fix: ") as exit_:
        call_isolated(sys.exit, 3, what="--model m:f")
    assert exit_.value.kind == "exit"
    with pytest.raises(UserCodeError, match="exit code 7") as hard:
        call_isolated(os._exit, 7, what="--model m:f")
    assert hard.value.kind == "exit"
    with (
        pytest.raises(UserCodeError, match="did not finish within 2 s") as hung,
        time_limit(2.0),  # --timeout, in wall seconds
    ):
        call_isolated(time.sleep, 3600, what="--model m:f")
    assert hung.value.kind == "timeout" and "--timeout" in str(hung.value)
    with pytest.raises(UserCodeError, match=r"signal 9 \(SIGKILL\)") as killed:
        call_isolated(kill_self)  # the worker's own pid: a crash
    assert killed.value.kind in ("signal", "memory")
    assert call_isolated(pid) != before  # a new worker answers


def test_a_deadline_bounds_a_calls_own_timeout(fresh_worker: None) -> None:
    call_isolated(pid)  # started: its start-up is not counted against a call
    started = time.monotonic()
    deadline = time.time() + 1.5  # advisor suggest --timeout's
    with pytest.raises(UserCodeError, match="did not finish"), time_limit(600.0, deadline):
        call_isolated(time.sleep, 60)
    assert time.monotonic() - started < 30


def test_a_runaway_allocation_is_a_memory_error_at_the_budget(
    fresh_worker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isolated, "memory_budget_bytes", lambda: 128 * 2**20)
    with pytest.raises(UserCodeError, match=r"ran out of memory.*0\.1 GiB.*MemoryError") as caught:
        call_isolated(hog, what="--model m:f")
    assert caught.value.kind == "memory"


def test_in_the_worker_a_call_runs_in_place() -> None:
    assert not isolated.in_worker()
    assert call_isolated(isolated.in_worker) is True


def test_calls_side_by_side_run_in_a_worker_each_and_raise_as_one(
    fresh_worker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deep model's two shallow traces run side by side, call i in worker slot i (the same
    worker for the same slot next time); a failing call raises its own error once both end;
    where this process may use one CPU, the calls run one after the other in slot 0."""
    monkeypatch.setattr(isolated, "slots", lambda: 2)
    one = call_isolated(pid)
    first = isolated.call_isolated_each([(pid, (), {}), (pid, (), {})])
    assert first[0] == one and first[1] not in (one, os.getpid())  # slot 0 is call_isolated's
    started = time.monotonic()
    isolated.call_isolated_each([(time.sleep, (1.0,), {}), (time.sleep, (1.0,), {})])
    assert time.monotonic() - started < 1.9  # side by side, not one after the other
    assert isolated.call_isolated_each([(pid, (), {}), (pid, (), {})]) == first  # kept
    with pytest.raises(ValueError, match="second"):
        isolated.call_isolated_each([(pid, (), {}), (raise_value_error, ("second",), {})])
    with pytest.raises(UserCodeError, match="exit code 4"):
        isolated.call_isolated_each([(sys.exit, (4,), {}), (pid, (), {})], what="--model m:f")
    monkeypatch.setattr(isolated, "slots", lambda: 1)
    alone = isolated.call_isolated_each([(pid, (), {}), (pid, (), {})])
    assert alone[0] == alone[1] != first[1]


def test_prestart_starts_the_workers_their_calls_then_use(
    fresh_worker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prestart(2)`` (an ``hf:`` model, whose deep traces run side by side) starts both
    workers at once; the calls side by side then run in them, no worker started later."""
    monkeypatch.setattr(isolated, "slots", lambda: 2)
    isolated.prestart(2)
    started = [isolated._WORKERS[s].proc.pid for s in (0, 1)]
    assert len(set(started)) == 2
    assert isolated.call_isolated_each([(pid, (), {}), (pid, (), {})]) == started
    monkeypatch.setattr(isolated, "slots", lambda: 1)
    isolated.shutdown()
    isolated.prestart(2)  # one CPU: one worker
    assert set(isolated._WORKERS) == {0}
