"""Shared test fixtures."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

# OpenMP threads that wait for work sleep instead of spinning (torch's CPU build uses GNU
# OpenMP; set before any test imports torch, and inherited by every child process). With more
# test processes than cores, spinning threads burned the CPU the other workers needed: three
# fcn trainings at once on 2 cores took 96 s of CPU and 45 s of wall time spinning, 36 s and
# 16 s passive (docs/benchmarks.md, "CI time"). What the tests time is their own code paths,
# not OpenMP's wake-up latency.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


# The tests' processes write the .pyc files of what they import, whatever the environment says:
# where PYTHONDONTWRITEBYTECODE is set (the CI image sets it), every process the tests start --
# CLI runs, probe children, service workers, trainings -- compiled every module it imported
# again (docs/benchmarks.md, "CI time"). The first import of a module writes it, later ones
# read it; so the README's test install does not compile every installed package up front.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# Ctrl-C reaches the processes the tests start, however the tests were started: a shell runs a
# command it starts in the background (`cmd &` without job control) with SIGINT ignored, which
# every child inherits across exec, and CPython then installs no KeyboardInterrupt handler. The
# tests that send SIGINT (Ctrl-C at several moments, a probe's child) then saw their `advisor`
# run on to exit 0: 8 failures in a `nohup ... &` run of the suite, none in the foreground. A
# Python handler here is reset to the default in each child at exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _compile_the_project() -> None:
    """Write the project's ``.pyc`` files once, before the test processes start (an editable
    install leaves the project's own modules uncompiled; the workers would compile them side
    by side). Best effort: a tree that cannot be written is left as it is."""
    import compileall

    root = Path(__file__).resolve().parents[1]
    for folder in ("advisor", "probes", "providers", "search_spaces"):
        compileall.compile_dir(root / folder, quiet=2, workers=0)


if "PYTEST_XDIST_WORKER" not in os.environ:  # once, in the process that starts the workers
    _compile_the_project()

# Fixtures shared by tests under tests/providers and tests/advisor, kept in tests/helpers:
# the managed-tuning specs and studies (make_spec, storage, study_factory) and moto's SageMaker
# running probe jobs here (sagemaker_on_moto), and local JSON servers (http_server).
pytest_plugins = ["tuning_studies", "sagemaker_moto", "fake_servers"]


@pytest.fixture(autouse=True)
def _advisor_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep every test's studies, caches and snapshots in its own temporary folder."""
    home = tmp_path / "advisor-home"
    monkeypatch.setenv("ADVISOR_HOME", str(home))
    # Reports are as wide as piped output (the console's PIPED_WIDTH) whatever the runner's
    # terminal says: pytest-xdist's workers inherit a COLUMNS that would wrap the tables.
    monkeypatch.delenv("COLUMNS", raising=False)
    return home


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first, each group in its own order: the 263 tests marked slow hold 87 %
    of the suite's test time. pytest-xdist's worksteal gives each worker a contiguous block and
    an idle worker steals the back half of the longest queue; with the slow tests last (the
    folders' order put the probe and provider tests there) the run ended with a few workers
    still in long tests while the others had nothing left (docs/benchmarks.md, "CI time")."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the cores. Some tests mostly wait (for a worker's
    lease to lapse, a server to restart, a child to time out) while holding a worker; the
    extra worker keeps the cores busy meanwhile (the suite on 2 cores: 712 s with 3 workers,
    about 800 s with 2; docs/benchmarks.md, "CI time")."""
    try:
        cores = len(os.sched_getaffinity(0))  # the cores this process may run on
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return cores + 1
