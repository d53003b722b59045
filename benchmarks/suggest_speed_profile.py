"""``benchmarks/suggest_speed.py --profile``: one cold ``advisor suggest`` under pyinstrument,
and the frames that took its time, by cumulative time.

The command runs as ``PYTHON -m pyinstrument -r json -o FILE -m advisor.cli.main suggest ...``
with the interpreter of the ``advisor`` executable (its ``#!`` line), so it profiles that
build; pyinstrument must be importable there (``pip install pyinstrument``; else the profile is
skipped with a message). Only the command's own process is sampled: a local probe runs in a
child process and shows as the wait for it (``subprocess`` frames)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PROJECT = ("advisor", "probes", "providers", "search_spaces", "examples")
PASS_THROUGH = 0.98  # a frame one callee holds this share of is a wrapper: not listed


def interpreter(advisor: str) -> str:
    """The Python interpreter of an ``advisor`` console script (its ``#!`` line); this one's
    when the file has none."""
    try:
        with open(advisor, "rb") as f:
            first = f.readline().decode(errors="replace").strip()
    except OSError:
        return sys.executable
    if first.startswith("#!") and "python" in first:
        return first[2:].strip().split()[0]
    return sys.executable


def profile(
    advisor: str, args: list[str], env: dict[str, str], cwd: Path, top: int, timeout_s: float
) -> dict[str, Any]:
    """One cold run of ``advisor suggest ARGS`` under pyinstrument (a new ``ADVISOR_HOME``):
    its wall time and the ``top`` frames by cumulative time, or ``skipped`` with the reason."""
    python = interpreter(advisor)
    has = subprocess.run([python, "-c", "import pyinstrument"], capture_output=True, env=env)
    if has.returncode != 0:
        return {"skipped": f"pyinstrument is not importable by {python} (pip install pyinstrument)"}
    with tempfile.TemporaryDirectory(prefix="advisor-speed-profile-") as tmp:
        out = Path(tmp) / "profile.json"
        home = Path(tmp) / "home"
        home.mkdir()
        # nodes down to 0.1 % of the run kept (pyinstrument's default drops those under 1 %)
        cmd = [python, "-m", "pyinstrument", "-r", "json", "-o", str(out),
               "-p", "processor_options.filter_threshold=0.001",
               "-m", "advisor.cli.main", "suggest", *args]  # fmt: skip
        before = [round(x, 2) for x in os.getloadavg()]
        started = time.perf_counter()
        done = subprocess.run(
            cmd,
            env={**env, "ADVISOR_HOME": str(home)},
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        wall = time.perf_counter() - started
        if done.returncode != 0 or not out.exists():
            return {"skipped": f"the profiled run failed ({done.returncode}): {done.stderr[-800:]}"}
        data = json.loads(out.read_text())
    frames = top_frames(data["root_frame"], top)
    return {
        "imports": imports(data["root_frame"]),
        "command": "advisor suggest " + " ".join(args),
        "wall_s": round(wall, 2),
        "load_before": before,
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "cores": os.cpu_count(),
        "profiled_s": round(float(data.get("duration") or 0.0), 2),
        "cpu_s": round(float(data.get("cpu_time") or 0.0), 2),
        "frames": frames,
    }


def _nodes(node: dict[str, Any], stack: tuple[str, ...]) -> Iterator[tuple[dict[str, Any], bool]]:
    """Every node with whether its frame is already on the stack above it (recursion: its time
    is counted once, at the outermost call)."""
    key = _key(node)
    yield node, key in stack
    for child in node.get("children") or ():
        yield from _nodes(child, (*stack, key))


def _key(node: dict[str, Any]) -> str:
    path = node.get("file_path_short") or node.get("file_path") or "?"
    return f"{node.get('function', '?')} ({path}:{node.get('line_no', 0)})"


def top_frames(root: dict[str, Any], top: int = 15) -> list[dict[str, Any]]:
    """The ``top`` frames by cumulative time (each frame's time summed over its calls, a
    recursive call counted once), with their self time and share of the whole. Wrappers --
    frames one callee holds at least ``PASS_THROUGH`` of -- and pyinstrument's own synthetic
    frames (``[self]``, ``[await]``) are left out, so the list shows where the time divides."""
    total = float(root.get("time") or 0.0) or 1.0
    cumulative: dict[str, float] = {}
    own: dict[str, float] = {}
    wrapper: dict[str, bool] = {}
    for node, nested in _nodes(root, ()):
        key = _key(node)
        t = float(node.get("time") or 0.0)
        kids = node.get("children") or ()
        if not nested:
            cumulative[key] = cumulative.get(key, 0.0) + t
        own[key] = own.get(key, 0.0) + max(0.0, t - sum(float(c.get("time") or 0) for c in kids))
        biggest = max((float(c.get("time") or 0.0) for c in kids), default=0.0)
        passes = t > 0 and biggest >= PASS_THROUGH * t
        wrapper[key] = wrapper.get(key, True) and passes
    kept = sorted(
        (k for k in cumulative if not wrapper[k] and not k.startswith("[")),
        key=lambda k: -cumulative[k],
    )
    return [
        {
            "frame": key,
            "cumulative_s": round(cumulative[key], 3),
            "self_s": round(own[key], 3),
            "share": round(cumulative[key] / total, 4),
        }
        for key in kept[:top]
    ]


def _package(node: dict[str, Any]) -> str:
    return str(node.get("file_path_short") or "?").split("/", 1)[0]


def imports(root: dict[str, Any], top: int = 8) -> list[dict[str, Any]]:
    """The ``top`` imports by time: each module body (a ``<module>`` frame) entered from
    outside its own package -- from another package's module body, or from a function at run
    time (``torch._dynamo`` at the optimizer's first use) -- with the frame that imported it.
    A package imported inside another's import is counted in both."""
    found: dict[str, dict[str, Any]] = {}

    def walk(node: dict[str, Any], by: str, outer: str | None) -> None:
        module = node.get("function") == "<module>"
        if module and outer is not None and _package(node) != outer:
            key = str(node.get("file_path_short") or "?")
            row = found.setdefault(key, {"module": key, "s": 0.0, "from": by})
            row["s"] = round(row["s"] + float(node.get("time") or 0.0), 3)
        inner = _package(node) if module else outer
        mine = not module and _package(node) in PROJECT
        for child in node.get("children") or ():
            walk(child, _key(node) if mine or not by else by, inner)

    walk(root, "", None)  # the program's own module body is the outermost: not an import
    return sorted(found.values(), key=lambda r: -float(r["s"]))[:top]


def markdown(prof: dict[str, Any]) -> str:
    if "skipped" in prof:
        return f"Profile: skipped ({prof['skipped']})."
    lines = [
        f"Where the time goes: one cold `{prof['command']}` under pyinstrument "
        f"({prof['wall_s']:.1f} s wall under the profiler, load {prof['load_before'][0]:.1f} -> "
        f"{prof['load_after'][0]:.1f} on {prof['cores']} cores; {prof['cpu_s']:.1f} s CPU of the "
        "command's own process; the local probes run in child processes and show as the wait "
        f"for them). Top {len(prof['frames'])} frames by cumulative time (a recursive call "
        f"counted once; wrappers, frames one callee holds {PASS_THROUGH:.0%} of, left out):",
        "",
        "| frame | cumulative s | share | self s |",
        "|---|---|---|---|",
    ]
    for f in prof["frames"]:
        frame = f["frame"].replace("|", "\\|")
        lines.append(
            f"| `{frame}` | {f['cumulative_s']:.1f} | {f['share']:.0%} | {f['self_s']:.1f} |"
        )
    if prof.get("imports"):
        lines += [
            "",
            "Imports of the command's process by time (a module body entered from outside its "
            "package; one imported inside another's import counts in both):",
            "",
            "| module | s | imported by |",
            "|---|---|---|",
        ]
        lines += [f"| `{i['module']}` | {i['s']:.1f} | `{i['from']}` |" for i in prof["imports"]]
    return "\n".join(lines)
