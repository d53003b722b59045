"""Issue #50, section 3: user code at arm's length. Each hostile model (``hostile_models``,
``user_models``) goes through the real `advisor` command in its own process, as a user runs
it: an exit, a crash, a hang or a runaway allocation in the user's code is one line naming
the model and the fix (exit 2, no traceback); `--timeout` is wall seconds; the child
processes die with the advisor; a batch too big for this machine is refused before it
allocates; a probe file of a million iteration times is estimated in bounded memory.

Each run gets a safety limit on its data segment (``SAFETY_DATA``): the code before the
issue would have grown without bound on some of these inputs.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_run import Outcome, error_lines
from repo_paths import HELPERS

pytestmark = pytest.mark.slow  # each starts the advisor, and PyTorch, in a new process

SAFETY_DATA = 4 * 2**30  # bytes of data segment any process of a run may hold
GPU = "ec2:g5.xlarge"


def _env(tmp_path: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(HELPERS), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "ADVISOR_HOME": str(tmp_path / "home")}


def _safety_limit() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (SAFETY_DATA, resource.RLIM_INFINITY))


def advisor(tmp_path: Path, *args: str, timeout: float = 300) -> Outcome:
    """``advisor ARGS`` in a new process (``python -m advisor.cli.main``)."""
    proc = subprocess.run(
        [sys.executable, "-m", "advisor.cli.main", *args],
        capture_output=True, text=True, timeout=timeout, env=_env(tmp_path),
        preexec_fn=_safety_limit,
    )  # fmt: skip
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


def one_line(outcome: Outcome) -> str:
    """The invariant of docs/reliability.md: exit 2, one line starting "Error: ", no
    traceback; returns that line."""
    text = outcome.out + outcome.err
    assert "Traceback" not in text, text
    lines = error_lines(outcome.err)
    assert outcome.code == 2 and len(lines) == 1, (outcome.code, outcome.err)
    assert lines[0].startswith("Error: "), lines
    return lines[0]


# -- an exit or a crash in the user's code -----------------------------------------------


@pytest.mark.parametrize(
    ("builder", "words"),
    [
        ("build_exits", "exit code 3"),  # sys.exit(3) in the builder
        ("build_forward_exits", "exit code 7"),  # os._exit(7) in forward
        ("build_segfaults", "signal 11 (SIGSEGV)"),  # a segfault in the builder
    ],
)
def test_an_exit_or_a_crash_in_the_model_is_one_line_not_the_advisors_end(
    tmp_path: Path, builder: str, words: str
) -> None:
    """Before: `advisor predict` ended silently with the model's exit code (3, 7), or with
    the segfault: the model was traced in the advisor's own process."""
    model = f"hostile_models:{builder}"
    line = one_line(advisor(tmp_path, "predict", "--model", model, "-b", "32", "-i", GPU))
    assert f"--model {model}" in line and words in line, line
    assert "To fix: " in line
    if builder == "build_segfaults":  # the user's own frame, from faulthandler
        assert "hostile_models.py" in line and "in build_segfaults" in line, line


# -- --timeout is wall seconds ---------------------------------------------------------


def test_a_forward_that_sleeps_ends_at_predicts_timeout(tmp_path: Path) -> None:
    """Before: `advisor predict` on a forward that sleeps had no time-out at all (and no
    --timeout): it hung for as long as the sleep."""
    args = ["predict", "--model", "hostile_models:build_forward_sleeps", "-b", "32", "-i", GPU]
    line = one_line(advisor(tmp_path, *args, "--timeout", "5"))
    assert "did not finish within 5 s (wall clock)" in line, line
    assert "--timeout" in line  # the fix names it


def test_the_probes_timeout_is_wall_seconds(tmp_path: Path) -> None:
    """Before: the probe's time-out counted CPU time, so a builder that sleeps ran to three
    times --timeout (18 s here)."""
    out = advisor(tmp_path, "probe", "--model", "user_models:build_slow", "--batch-size", "32",
                  "--timeout", "6", "--json")  # fmt: skip
    assert out.code == 1, out  # a failed probe, reported as such
    result = json.loads(out.out.strip().splitlines()[-1])
    assert result["status"] == "timeout"
    assert result["wall_s"] < 12.0, result["wall_s"]


# -- the children die with the advisor ---------------------------------------------------


def _children(pid: int, needle: str) -> list[int]:
    """Live processes whose parent is ``pid`` and whose command line holds ``needle``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat[1]) == pid and stat[0] != "Z" and needle in cmdline:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for(find: Callable[[], list[int]], seconds: float) -> list[int]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        found = find()
        if found:
            return found
        time.sleep(0.2)
    return []


@pytest.mark.parametrize(
    ("args", "child"),
    [
        # the probe's child sleeps in the real build (its meta trace returns at once)
        (["probe", "--model", "hostile_models:build_sleeps_when_real", "--batch-size", "32"],
         "advisor.probes.child"),
        # the isolated worker sleeps in the model's forward while it is traced
        (["predict", "--model", "hostile_models:build_forward_sleeps", "-b", "32", "-i", GPU],
         "advisor.probes.isolated_worker"),
    ],
)  # fmt: skip
def test_sigterm_to_the_advisor_ends_its_child(tmp_path: Path, args: list[str], child: str) -> None:
    """Before: SIGTERM to `advisor probe` left `advisor.probes.child` running, reparented to
    init."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "advisor.cli.main", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(tmp_path),
        preexec_fn=_safety_limit,
    )  # fmt: skip
    found: list[int] = []
    try:
        found = _wait_for(lambda: _children(proc.pid, child), 120)
        assert found, f"no {child} started"
        time.sleep(3)  # inside the user's code by now (it sleeps for an hour)
        assert all(_alive(p) for p in found)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        left = [p for p in found if _alive(p)]
        end = time.monotonic() + 10
        while left and time.monotonic() < end:
            time.sleep(0.2)
            left = [p for p in found if _alive(p)]
        assert not left, f"{child} {left} outlived the advisor"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in found:  # never leave one behind, even when this fails
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


# -- memory ------------------------------------------------------------------------------


def _rss_run(tmp_path: Path, args: list[str], budget_mib: int | None = None) -> dict[str, Any]:
    """``advisor ARGS`` run in a new process by ``main`` itself, under the safety limit:
    its exit code, its stderr lines (``errors``) and the peak RSS (KiB) of that process
    alone (its ``VmHWM``: ``ru_maxrss`` of a process started by ``fork`` keeps the parent's
    peak across ``exec``, a pytest worker's) and of the largest of its children
    (``resource.getrusage``)."""
    patch = (
        f"from advisor.probes import isolated; "
        f"isolated.memory_budget_bytes = lambda: {budget_mib} * 2**20\n"
        if budget_mib is not None
        else ""
    )
    script = (
        "import json, resource, sys\n"
        f"try:\n    {patch or 'pass'}\nexcept ImportError:\n    pass\n"
        "from advisor.cli.main import main\n"
        "code = 0\n"
        "try:\n    main(sys.argv[1:])\n"
        "except SystemExit as exc:\n    code = exc.code if isinstance(exc.code, int) else 1\n"
        "try:\n    from advisor.probes import isolated\n    isolated.shutdown()\n"
        "except ImportError:\n    pass\n"
        "me = next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM'))\n"
        "kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "figures = {'code': code, 'self_kib': me, 'children_kib': kids}\n"
        "print('@rss ' + json.dumps(figures), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=600,
        env=_env(tmp_path), preexec_fn=_safety_limit,
    )  # fmt: skip
    lines = proc.stderr.splitlines()
    figures = [json.loads(x[5:]) for x in lines if x.startswith("@rss ")]
    assert figures, proc.stderr[-2000:]
    errors = error_lines("\n".join(x for x in lines if not x.startswith("@rss ")))
    return {**figures[-1], "errors": errors}


def test_a_runaway_allocation_in_the_model_is_one_line_and_not_the_advisors_memory(
    tmp_path: Path,
) -> None:
    """Before: the builder ran in the advisor's own process, which grew to the machine's
    memory (here: to the safety limit, 4 GiB). Now its worker raises MemoryError at its
    budget (256 MiB here, as this machine's available memory sizes it otherwise)."""
    args = ["predict", "--model", "hostile_models:build_hogs_memory", "-b", "32", "-i", GPU]
    run = _rss_run(tmp_path, args, budget_mib=256)
    assert run["code"] == 2, run
    (line,) = [x for x in run["errors"] if x.strip()]
    assert line.startswith("Error: --model hostile_models:build_hogs_memory"), line
    assert "ran out of memory" in line and "MemoryError" in line, line
    assert run["self_kib"] < 1.5 * 2**20, run  # the advisor itself stayed small


def test_a_batch_too_big_for_this_machine_is_refused_before_it_allocates(
    tmp_path: Path,
) -> None:
    """Before: `advisor probe --batch-size 100000000` grew to 15.7 GB before anything
    checked it (here it would meet the 4 GiB safety limit and fail as out of memory)."""
    run = _rss_run(tmp_path, ["probe", "--model", "fcn", "--batch-size", "100000000"])
    assert run["code"] == 2, run
    (line,) = [x for x in run["errors"] if x.strip()]
    assert "--batch-size 100000000 does not fit this machine's memory for fcn" in line, line
    assert "or less (the largest that fits here)" in line, line
    assert run["self_kib"] < 1.5 * 2**20, run
    assert run["children_kib"] < 1.5 * 2**20, run  # no probe child grew either


def test_estimate_of_a_million_iteration_times_stays_in_bounded_memory(tmp_path: Path) -> None:
    """Before: `advisor estimate --probe` on a valid 5 MB file of 1,000,000 iteration times
    reached 18.4 GB (a bootstrap of 2000 x n samples); here it would meet the safety limit."""
    from advisor.probes.result import ProbeResult

    steps = tuple(0.05 + (i % 97) * 1e-4 for i in range(1_000_000))
    probe = ProbeResult("fcn", "torch", 256, "cpu", 2, init_s=3.0, iteration_s=steps,
                        validation_s=(1.0, 0.9), n_train=50_000, n_val=10_000)  # fmt: skip
    path = tmp_path / "probe.json"
    path.write_text(probe.to_json())
    run = _rss_run(tmp_path, ["estimate", "--probe", str(path), "--epochs", "3", "--json"])
    assert run["code"] == 0, run
    # bounded, against 18.4 GB before: 163 MiB alone here; 1.0 GiB once inside the whole
    # suite's parallel run (cause not found; left in the closing note): under 2 GiB
    assert run["self_kib"] < 2.0 * 2**20, run
