"""Facts about the host process that every probe runner records (no framework imports)."""

from __future__ import annotations

import os
import platform
import resource


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def peak_rss_bytes() -> int:
    """This process's peak resident memory in bytes (since ``reset_peak_rss`` where Linux
    allows it: ``VmHWM``; else the process's lifetime peak)."""
    try:
        with open("/proc/self/status", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if platform.system() == "Darwin" else peak * 1024)


def reset_peak_rss() -> bool:
    """Restart the peak resident memory count at the current size (Linux: ``clear_refs``
    value 5 resets ``VmHWM``); whether it could."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def cores() -> int:
    """The CPU cores this process may use (its affinity mask, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def busy_cpu_s() -> float | None:
    """CPU seconds every process on this machine has spent busy since boot (``/proc/stat``:
    user, nice, system, irq, softirq, steal); None where it cannot be read."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
        ticks = os.sysconf("SC_CLK_TCK")
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[1:9])
    except (OSError, ValueError, IndexError):
        return None
    return (user + nice + system + irq + softirq + steal) / ticks


def others_cores(
    busy_before: float | None, busy_after: float | None, own_cpu_s: float, wall_s: float
) -> float | None:
    """How many cores other processes kept busy on average over ``wall_s`` seconds: the
    machine's busy CPU time less this process's own (``own_cpu_s``), per second; None when
    unknown. A probe timed while others used a core or more shared the CPU with them."""
    if busy_before is None or busy_after is None or wall_s <= 0:
        return None
    return max(0.0, (busy_after - busy_before - own_cpu_s) / wall_s)


def check_threads(threads: object) -> None:
    """Issue #28: a probe's threads are a whole number from 1 to this machine's cores (more
    only contend with each other; thousands stall the machine). Raises AdvisorError."""
    from advisor.errors import AdvisorError

    n = cores()
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= n:
        raise AdvisorError(
            f"--threads must be a whole number from 1 to the {n} cores of this machine, "
            f"got {threads!r}.",
            f"give at most {n} (default: all of them).",
        )


def running_share(cpu_start: float | None, cpu_end: float | None, wall_s: float) -> float | None:
    """The share of ``wall_s`` this process ran on the CPU: its CPU seconds over the same span
    (``time.process_time`` at its start and end) divided by ``wall_s``, at most 1 (threads
    running side by side count once); None where either reading is missing (issue #36: a
    probe's initialisation as it runs alone, without the time it waited for a busy core)."""
    if cpu_start is None or cpu_end is None or wall_s <= 0:
        return None
    return max(0.0, min(1.0, (cpu_end - cpu_start) / wall_s))
