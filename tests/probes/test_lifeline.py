"""A child started by ``advisor.probes.lifeline.start_child`` is never left behind by a Ctrl-C
that lands while it starts (a CI run of ``test_ctrl_c_stops_the_probe_child_and_exits_130``
found a probe child still there after the parent's exit)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from advisor.probes.lifeline import PARENT_ENV, start_child


def _write_pid_then_wait(path: str) -> None:  # in the child, between its fork and its exec
    Path(path).write_text(str(os.getpid()))
    time.sleep(1.0)


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs POSIX signals")
def test_a_ctrl_c_while_the_child_starts_kills_and_reaps_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    main = threading.main_thread().ident
    assert main == threading.get_ident()
    interrupt = threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT))
    interrupt.start()
    with pytest.raises(KeyboardInterrupt):
        start_child(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            preexec_fn=lambda: _write_pid_then_wait(str(pid_file)),
        )
    interrupt.join()
    pid = int(pid_file.read_text())
    with pytest.raises(ChildProcessError):  # killed and reaped: running or a zombie, it
        # would still be a child of this process
        os.waitpid(pid, os.WNOHANG)


def test_the_child_learns_its_parent_and_runs_the_command() -> None:
    proc = start_child(
        [sys.executable, "-c", f"import os; print(os.environ['{PARENT_ENV}'])"],
        stdout=subprocess.PIPE,
        text=True,
        env={"PATH": os.environ.get("PATH", "")},
    )
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out.strip() == str(os.getpid())
