"""The measuring half of ``benchmarks/suggest_speed.py``: one command timed from outside (its
answers read from stdout as they come), the resident memory of process trees sampled every
50 ms, and an ``advisor serve`` (+ ``advisor worker`` and Redis) stack on free local ports."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import psutil

MB = 1e6  # decimal: the goals are in GB (1.5 GB = 1.5e9 bytes)


class AnswerWatch:
    """Reads a ``suggest`` command's stdout line by line: when the first answer and the final
    answer began to show.

    The first answer is the block that starts with a line ``first answer`` (issue #36: its
    rows indented beneath it); the final answer is the first line after it that is neither
    blank nor indented (the report's title). A command without the block (``--json``, a
    resumed run, an older build) shows its final answer first, so that is its first answer
    too (as ``benchmarks/first_answer.py --screen`` counts it)."""

    def __init__(self) -> None:
        self.first_s: float | None = None
        self.early = False  # the first answer came before the final one
        self.final_s: float | None = None
        self.first_recommended: str | None = None
        self.recommended: str | None = None
        self.footer: str | None = None  # "1 trial, converged, 32.1 s (search 29 s, ...)"
        self._in_block = False

    def feed(self, line: str, t: float) -> None:
        text = line.rstrip("\r\n")
        if self.final_s is not None:
            if self.recommended is None and text.startswith("recommended:"):
                self.recommended = text.split(":", 1)[1].strip()
            if self.footer is None and _is_footer(text):
                self.footer = text.strip()
            return
        if not text.strip():
            self._in_block = False
            return
        if self.first_s is None and text.startswith("first answer"):
            self.first_s, self.early, self._in_block = t, True, True
            return
        if self._in_block and text[:1].isspace():
            if self.first_recommended is None and text.lstrip().startswith("recommended:"):
                self.first_recommended = text.split(":", 1)[1].strip()
            return
        self._in_block = False
        self.final_s = t
        if self.first_s is None:
            self.first_s = t
        if text.startswith("recommended:"):
            self.recommended = text.split(":", 1)[1].strip()


def _is_footer(text: str) -> bool:
    head = text.split(",", 1)[0].split()
    return len(head) == 2 and head[0].isdigit() and head[1] in ("trial", "trials")


class TreeSampler(threading.Thread):
    """Every ``interval`` s, the resident memory summed over each group's process trees (a
    root and all its descendants): the peak of each group and of all together, the process
    count at the peak, and the high-water mark (``VmHWM``) of the first root alone."""

    def __init__(self, groups: dict[str, Sequence[int]], interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.groups = {name: list(pids) for name, pids in groups.items()}
        self.interval = interval
        self.peak: dict[str, int] = {name: 0 for name in groups}
        self.peak_total = 0
        self.peak_procs = 0
        self.main_hwm = 0
        self.samples = 0
        self._halt = threading.Event()
        self._main = next(iter(self.groups.values()))[0]

    def sample(self) -> None:
        seen: set[int] = set()
        total = 0
        for name, roots in self.groups.items():
            rss = 0
            for proc in _trees(roots):
                if proc.pid in seen:
                    continue
                try:
                    rss += proc.memory_info().rss
                    seen.add(proc.pid)
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    pass
            self.peak[name] = max(self.peak[name], rss)
            total += rss
        if total > self.peak_total:
            self.peak_total, self.peak_procs = total, len(seen)
        self.main_hwm = max(self.main_hwm, _vm_hwm(self._main))
        self.samples += 1

    def run(self) -> None:
        while True:
            self.sample()
            if self._halt.wait(self.interval):
                return

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


def _trees(roots: Sequence[int]) -> list[psutil.Process]:
    out: list[psutil.Process] = []
    for pid in roots:
        try:
            root = psutil.Process(pid)
            out += [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
    return out


def _vm_hwm(pid: int) -> int:
    """The process's peak resident set so far (``/proc/PID/status``), bytes; 0 if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tree_cpu_s(roots: Sequence[int]) -> float:
    """CPU seconds (user + system) the trees have used: each live process's own and its
    reaped children's (a descendant that ended was added to its parent's when reaped)."""
    total = 0.0
    for proc in _trees(roots):
        try:
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            continue
    return total


def kill_tree(pid: int) -> None:
    """SIGKILL a process and all its descendants (a run past its time limit)."""
    for proc in reversed(_trees([pid])):
        with contextlib.suppress(psutil.Error):
            proc.kill()


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_command(
    cmd: Sequence[str],
    env: dict[str, str],
    cwd: Path,
    timeout_s: float,
    others: Sequence[int] = (),
) -> dict[str, Any]:
    """Run ``cmd`` to its end, its stdout read as it comes: seconds to the first and the final
    answer and to its exit, its CPU seconds (``wait4``: the command and every descendant it
    reaped), ``ru_maxrss`` (``wait4``: the largest of the command and its reaped descendants)
    and its own ``VmHWM``, the peak of the resident memory summed over its process tree (and,
    apart, over the ``others`` process trees: a service's), the load average before and after.
    Past ``timeout_s`` the command's tree is killed (``timed_out``)."""
    before = load()
    service_cpu0 = tree_cpu_s(others) if others else None
    started = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**env, "PYTHONUNBUFFERED": "1"},
    )
    groups: dict[str, Sequence[int]] = {"command": [proc.pid]}
    if others:
        groups["service"] = others
    sampler = TreeSampler(groups)
    sampler.start()
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        kill_tree(proc.pid)

    watchdog = threading.Timer(timeout_s, expire)
    watchdog.start()
    errors: list[str] = []
    reader = threading.Thread(target=_tail, args=(proc.stderr, errors), daemon=True)
    reader.start()
    watch = AnswerWatch()
    assert proc.stdout is not None
    for line in proc.stdout:
        watch.feed(line, time.perf_counter() - started)
    _, status, usage = os.wait4(proc.pid, 0)
    exit_s = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    watchdog.cancel()
    sampler.stop()
    reader.join(5)
    proc.stdout.close()
    ok = proc.returncode == 0 and not timed_out.is_set()
    final = watch.final_s if watch.final_s is not None else exit_s
    row: dict[str, Any] = {
        "rc": proc.returncode,
        "ok": ok,
        "timed_out": timed_out.is_set(),
        "first_s": _r(watch.first_s if watch.first_s is not None else final) if ok else None,
        "early_first_answer": watch.early,
        "final_s": _r(final) if ok else None,
        "exit_s": _r(exit_s),
        "cpu_s": _r(usage.ru_utime + usage.ru_stime),
        "cpu_user_s": _r(usage.ru_utime),
        "cpu_sys_s": _r(usage.ru_stime),
        "peak_rss_mb": round(sampler.peak["command"] / MB, 1),
        "peak_procs": sampler.peak_procs,
        "main_hwm_mb": round(sampler.main_hwm / MB, 1),
        "ru_maxrss_mb": round(usage.ru_maxrss * 1024 / MB, 1),  # Linux: KiB
        "rss_samples": sampler.samples,
        "first_recommended": watch.first_recommended,
        "recommended": watch.recommended,
        "footer": watch.footer,
        "load_before": before,
        "load_after": load(),
        "cores": os.cpu_count(),
        "error": None if ok else ("".join(errors)[-1500:] or f"exit {proc.returncode}"),
    }
    if others:
        row["service_peak_rss_mb"] = round(sampler.peak["service"] / MB, 1)
        row["service_cpu_s"] = _r(tree_cpu_s(others) - (service_cpu0 or 0.0))
    return row


def _tail(stream: IO[str] | None, out: list[str]) -> None:
    """Keep the last 4,000 characters of ``stream`` (read to its end, so the pipe never
    fills and blocks the command)."""
    if stream is None:
        return
    for line in stream:
        out.append(line)
        while sum(map(len, out)) > 4000 and len(out) > 1:
            out.pop(0)


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(ready: Any, what: str, proc: subprocess.Popen[Any], timeout_s: float = 90.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        if ready():
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} not ready after {timeout_s:.0f} s")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class Service:
    """``advisor serve`` on a free local port over ``home`` (SQLite in ``ADVISOR_HOME``), and
    a bearer token for it. ``mode`` "worker": jobs queued in a Redis of its own (Debian's
    ``redis-server``, persisting nothing) and run by one ``advisor worker`` (docs/service.md,
    "A team"); "inprocess": in ``advisor serve``'s own job threads (docs/service.md, "One
    machine"). ``backend``: the hidden ``--backend`` of serve and worker (the smoke test's
    replay table). Ready when the server listens and the worker listens on its queue."""

    def __init__(
        self, advisor: str, home: Path, mode: str, env: dict[str, str], backend: str | None
    ) -> None:
        self.home, self.mode = home, mode
        self.env = {**env, "ADVISOR_HOME": str(home)}
        self.procs: list[subprocess.Popen[Any]] = []
        self.redis: subprocess.Popen[Any] | None = None
        extra = ["--backend", backend] if backend else []
        token = subprocess.run(
            [advisor, "token", "create", "bench"],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        self.token = token.stdout.strip().splitlines()[-1]
        queue: list[str] = []
        if mode == "worker":
            exe = shutil.which("redis-server")
            if exe is None:
                raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
            rport = free_port()
            self.redis = subprocess.Popen(
                [exe, "--port", str(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                 "no", "--dir", str(home)],
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
            _wait(lambda: _listening(rport), "redis-server", self.redis)
            queue = ["--redis", f"redis://127.0.0.1:{rport}/0"]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = self._start(
            [advisor, "serve", "--port", str(self.port), *queue, *extra], "serve"
        )
        _wait(lambda: _listening(self.port), "advisor serve", self.server)
        self.worker = None
        if mode == "worker":
            self.worker = self._start([advisor, "worker", *queue, *extra], "worker")
            _wait(lambda: "Listening on" in self.log("worker"), "advisor worker", self.worker)

    def _start(self, cmd: list[str], name: str) -> subprocess.Popen[Any]:
        with (self.home / f"{name}.log").open("w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        path = self.home / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        for proc in [*self.procs, *([self.redis] if self.redis else [])]:
            if proc.poll() is None:
                proc.terminate()
        for proc in [*self.procs, *([self.redis] if self.redis else [])]:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                kill_tree(proc.pid)
                proc.wait(5)
