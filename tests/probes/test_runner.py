"""The subprocess probe runner: a real probe end to end, and failures that never raise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from advisor.probes.result import ProbeRequest
from advisor.probes.runner import FRAMEWORK_ENTRY, run_probe
from repo_paths import HELPERS

from advisor.errors import AdvisorError


@pytest.fixture(autouse=True)
def _user_models_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    path = os.pathsep.join(p for p in (str(HELPERS), os.environ.get("PYTHONPATH", "")) if p)
    monkeypatch.setenv("PYTHONPATH", path)


@pytest.mark.slow
def test_real_fcn_probe_in_a_child_process() -> None:
    events: list[tuple[str, int, int]] = []
    result = run_probe(
        ProbeRequest("fcn", batch_size=16, iterations=4, threads=1, timeout_s=120),
        on_progress=lambda *e: events.append(e),
    )
    assert result.ok, result.error
    assert result.framework == "torch" and len(result.iteration_s) == 4
    # init runs from the parent's spawn: it includes interpreter start and `import torch`
    assert result.init_s > 0.3
    # issue #36: the child's CPU clock read too (0 at its start): the share of it that ran
    running = result.fingerprint["init_clocks"]["running"]
    assert 0 < running <= 1
    # ... and a share under 1 scaled the initialisation, saying so (the reported init may still
    # exceed the wall time read: it adds the data preparation scaled to the whole dataset)
    note = result.fingerprint["init_note"]
    assert running == 1 or f"x{running:.2f}" in note, note
    assert result.flops_per_iteration and result.flops_per_iteration > 0
    assert ("iterations", 4, 4) in events


@pytest.mark.slow
def test_user_model_probe_ok() -> None:
    result = run_probe(
        ProbeRequest("user_models:build", batch_size=32, iterations=5, timeout_s=120)
    )
    assert result.ok, result.error
    assert result.n_train == 512 and result.n_val == 128
    assert result.validation_samples_measured == 128 and result.validation_scale == 1.0


@pytest.mark.slow
def test_nan_loss_is_a_failed_probe_not_an_exception() -> None:
    result = run_probe(ProbeRequest("user_models:build_nan", 32, iterations=5, timeout_s=120))
    assert result.status == "nan"
    assert "nan" in (result.error or "").lower()


def test_crash_is_a_failed_probe_with_its_reason() -> None:
    result = run_probe(ProbeRequest("user_models:build_crash", 32, iterations=5, timeout_s=120))
    assert result.status == "error"
    assert "exited with code 3" in (result.error or "")


def test_timeout_kills_the_probe() -> None:
    result = run_probe(ProbeRequest("user_models:build_slow", 32, iterations=5, timeout_s=0.5))
    assert result.status == "timeout"
    assert "0.5 s" in (result.error or "")
    assert result.wall_s < 30


@pytest.mark.slow
def test_unknown_user_module_is_an_error_result() -> None:
    result = run_probe(ProbeRequest("no_such_module:build", 32, iterations=5, timeout_s=120))
    assert result.status == "error" and "no_such_module" in (result.error or "")


def test_unknown_framework_is_a_user_error() -> None:
    assert set(FRAMEWORK_ENTRY) == {"torch", "keras"}
    with pytest.raises(AdvisorError, match="framework"):
        run_probe(ProbeRequest("fcn", 32, framework="jax"))


@pytest.mark.slow
def test_sigkilled_child_is_labelled_killed_by_signal_9() -> None:
    result = run_probe(ProbeRequest("user_models:build_sigkill", 32, iterations=5, timeout_s=120))
    assert result.status == "killed"
    assert result.reason == "killed by signal 9 (SIGKILL)"


@pytest.mark.slow
def test_sigkill_is_out_of_memory_only_with_the_kernels_evidence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from advisor.probes import runner

    counts = iter([4, 5])  # the oom_kill counter rose while the child ran
    monkeypatch.setattr(runner, "oom_kill_count", lambda: next(counts))
    result = run_probe(ProbeRequest("user_models:build_sigkill", 32, iterations=5, timeout_s=120))
    assert result.status == "oom"
    assert result.reason.startswith("killed by signal 9 (SIGKILL); the kernel's out-of-memory")
    assert "4 -> 5" in result.reason
    # an unchanged or unreadable counter is no evidence
    assert runner.classify_exit(-9, [], (5, 5))[0] == "killed"
    assert runner.classify_exit(-9, [], (None, None))[0] == "killed"
    assert runner.classify_exit(-15, [], (1, 2)) == ("killed", "killed by signal 15 (SIGTERM)")


def test_oom_kill_count_reads_the_kernels_counters() -> None:
    from advisor.probes.runner import oom_kill_count

    count = oom_kill_count()
    if not Path("/proc/vmstat").exists():
        pytest.skip("no /proc/vmstat here")
    assert isinstance(count, int) and count >= 0


def test_ctrl_c_in_the_parent_kills_the_probe_child(monkeypatch: pytest.MonkeyPatch) -> None:
    import signal
    import subprocess
    import threading
    import time

    from advisor.probes import runner

    children: list[subprocess.Popen[str]] = []
    real_popen = subprocess.Popen

    def popen(*args: object, **kwargs: object) -> subprocess.Popen[str]:
        proc = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        children.append(proc)
        # a real SIGINT to this process once the child runs, as Ctrl-C sends
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        return proc

    monkeypatch.setattr(runner.subprocess, "Popen", popen)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_probe(ProbeRequest("user_models:build_slow", 32, iterations=5, timeout_s=120))
    assert time.monotonic() - start < 30  # not the child's 60 s sleep nor the timeout
    (child,) = children
    assert child.returncode == -signal.SIGKILL  # killed and reaped by run_probe
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)


def test_child_reports_a_framework_that_cannot_be_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a `torch` package that fails on import: the child still writes a classified result
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise MemoryError('no memory to import')\n")
    path = os.pathsep.join([str(tmp_path), str(HELPERS), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path)
    result = run_probe(ProbeRequest("fcn", 32, iterations=5, timeout_s=120))
    assert result.status == "oom"
    assert result.reason == "MemoryError: no memory to import"


def test_a_probe_waiting_for_a_busy_cpu_is_not_timed_out_by_the_wait() -> None:
    """Issue #36, kept for suggest's own per-probe limit (``excuse_cpu_wait``): the time the
    child waited in the run queue for a busy CPU does not count. Issue #50: a request's
    timeout (``--timeout``) is wall seconds, and a child that sleeps is charged its sleep."""
    from advisor.probes.runner import WALL_CAP, probe_time_left

    assert probe_time_left(100.0, 80.0, 120.0) == pytest.approx(20.0)  # --timeout: the wall
    assert probe_time_left(100.0, 0.0, 120.0, True) == pytest.approx(20.0)  # alone: the wall
    assert probe_time_left(100.0, None, 120.0, True) == pytest.approx(20.0)  # unknown: wall
    assert probe_time_left(200.0, 140.0, 120.0, True) == pytest.approx(60.0)  # 140 s waited
    assert probe_time_left(130.0, 5.0, 120.0, True) < 0  # asleep or at work: it counts
    hung = probe_time_left(WALL_CAP * 120.0, WALL_CAP * 110.0, 120.0, True)  # the wall cap
    assert hung <= 0


def test_the_childs_run_queue_wait_is_read_from_proc() -> None:
    from advisor.probes.runner import child_cpu_wait_s

    mine = child_cpu_wait_s(os.getpid())
    if mine is None:
        pytest.skip("no /proc/PID/schedstat here")
    assert mine >= 0.0
    assert child_cpu_wait_s(2**22 + 12345) is None  # no such process


def test_a_sleeping_probe_ends_at_its_timeout_in_wall_seconds() -> None:
    """Issue #50: a builder that sleeps used no CPU, so it ran to three times its timeout;
    now it ends at its timeout (under suggest's own limit the sleep counts too, less only
    what the child waited for a busy CPU: ``probe_time_left`` above)."""
    request = ProbeRequest("user_models:build_slow", 32, iterations=5, timeout_s=4.0)
    result = run_probe(request)
    assert result.status == "timeout"
    assert result.wall_s < 8.0, result.wall_s  # 12 s before (WALL_CAP x 4 s)
