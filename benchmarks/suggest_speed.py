"""How fast `advisor suggest` answers, against issue #46's goals: cold (a new ``ADVISOR_HOME``)
and resumed (the same command again on that home), locally and on the service.

Goals (issue #46 section 2), each figure judged by its median over ``--repeat`` runs:

- ``suggest --model fcn --budget 5``: first answer <= 5 s, final answer <= 30 s, resumed <= 1 s,
  peak resident memory <= 1.5 GB (1.5e9 bytes);
- ``suggest --model examples.transformers:gpt2_large --budget 50``: final answer <= 60 s cold,
  resumed <= 2 s;
- the same on the service: ``advisor serve`` + one ``advisor worker`` on a Redis queue (or
  ``--service inprocess``: serve's own job threads), SQLite in the run's ``ADVISOR_HOME``, the
  request sent by ``advisor suggest ... --server URL``.

Each run is a real process of the ``advisor`` executable (``--advisor PATH``; ``--other PATH``
times a second build alternately with it, as ``benchmarks/first_answer.py`` does), its stdout
read as it comes (``suggest_speed_proc.AnswerWatch``): the first answer is the "first answer"
block (issue #36) or, without one, the report; the final answer is the report's first line;
"command" is the process's exit. A resumed run is judged by its exit. CPU seconds are the
command's and its reaped descendants' (``wait4``); peak RSS is the resident memory summed
over the command's process tree, sampled every 50 ms (on the service: apart, over the server
and worker trees, which do the work; Redis left out); ``ru_maxrss`` is ``wait4``'s (the
largest single process of the tree). The load average and the cores stand beside every figure.

    python benchmarks/suggest_speed.py [--cases fcn,gpt2-large] [--surfaces local,service]
        [--repeat 3] [--advisor PATH] [--other PATH] [--timeout 1800] [--profile]
        [--json FILE] [--merge FILE ...] [--write-docs [--label before]] [--quick]

``--profile``: one cold fcn run under pyinstrument, its top 15 frames by cumulative time and
its imports by time (``suggest_speed_profile``). ``--timeout``: the most one run may take (its
process tree is then killed and the run counts as failed); not ``suggest --timeout``, which
prints no first answer. ``--merge``: add the rows of earlier ``--json`` files (one section
from several runs). ``--write-docs``: the section "Advice speed (issue #46)" of
docs/benchmarks.md, or with ``--label L`` "Advice speed (issue #46, L)" (the "before" is one).
``--quick`` (the smoke test): fcn on a reduced space (batch 256, T4 machines, 5 probe
iterations), once cold and once resumed, locally, with no goals judged.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs_section import publish
from suggest_speed_proc import Service, run_command
from suggest_speed_profile import markdown as profile_markdown
from suggest_speed_profile import profile

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Advice speed (issue #46)"
CASES: dict[str, list[str]] = {
    "fcn": ["--model", "fcn", "--budget", "5"],
    "gpt2-large": ["--model", "examples.transformers:gpt2_large", "--budget", "50"],
}
QUICK_SPACE = "workload: fcn\nmachines:\n  spot: true\n  include_local: true\nbatch_sizes: [256]\n"
QUICK_ARGS = ["--gpus", "T4", "--probe-iterations", "5"]
# (case, run, figure) -> the most it may be (seconds; peak_rss_mb: MB, 1e6 bytes)
GOALS: dict[tuple[str, str, str], float] = {
    ("fcn", "cold", "first_s"): 5.0,
    ("fcn", "cold", "final_s"): 30.0,
    ("fcn", "resumed", "exit_s"): 1.0,
    ("fcn", "cold", "peak_rss_mb"): 1500.0,
    ("gpt2-large", "cold", "final_s"): 60.0,
    ("gpt2-large", "resumed", "exit_s"): 2.0,
}
FIGURES = {
    "first_s": "first answer",
    "final_s": "final answer",
    "exit_s": "command",
    "peak_rss_mb": "peak memory",
}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ADVISOR_HOME", "ADVISOR_TOKEN")}
    env["COLUMNS"] = "200"  # the report's lines unwrapped (the answers are read from them)
    return env


def run_local(
    advisor: str, build: str, case: str, args: list[str], timeout_s: float, rep: int
) -> list[dict[str, Any]]:
    """A cold run in a new ``ADVISOR_HOME``, then the same command again there."""
    rows = []
    home = Path(tempfile.mkdtemp(prefix="advisor-speed-"))
    try:
        env = {**_env(), "ADVISOR_HOME": str(home)}
        for run in ("cold", "resumed"):
            row = run_command([advisor, "suggest", *args], env, ROOT, timeout_s)
            rows.append(_tag(row, build, advisor, "local", case, run, rep, args))
            _say(rows[-1])
            if not row["ok"]:
                break  # a resumed run after a failed cold one would measure something else
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return rows


def run_service(
    advisor: str,
    build: str,
    case: str,
    args: list[str],
    timeout_s: float,
    rep: int,
    mode: str,
    backend: str | None,
) -> list[dict[str, Any]]:
    """A new service (new ``ADVISOR_HOME``, server, worker, Redis) for the case: the request
    cold, then again (the same job asked twice: its study resumes or its answer is kept)."""
    rows = []
    home = Path(tempfile.mkdtemp(prefix="advisor-speed-service-"))
    service = None
    try:
        service = Service(advisor, home, mode, _env(), backend)
        env = {**_env(), "ADVISOR_TOKEN": service.token}
        client_home = home / "client"  # the client keeps nothing; a home of its own all the same
        client_home.mkdir()
        env["ADVISOR_HOME"] = str(client_home)
        cmd = [advisor, "suggest", *args, "--server", service.url]
        for run in ("cold", "resumed"):
            row = run_command(cmd, env, ROOT, timeout_s, others=service.pids)
            rows.append(_tag(row, build, advisor, f"service ({mode})", case, run, rep, args))
            _say(rows[-1])
            if not row["ok"]:
                break
    except (RuntimeError, TimeoutError, OSError) as exc:
        log = "" if service is None else service.log("serve")[-800:] + service.log("worker")[-800:]
        row = {"ok": False, "error": f"the service did not start: {exc}\n{log}"}
        rows.append(_tag(row, build, advisor, f"service ({mode})", case, "cold", rep, args))
        _say(rows[-1])
    finally:
        if service is not None:
            service.stop()
        shutil.rmtree(home, ignore_errors=True)
    return rows


def _tag(
    row: dict[str, Any],
    build: str,
    advisor: str,
    surface: str,
    case: str,
    run: str,
    rep: int,
    args: list[str],
) -> dict[str, Any]:
    head = {"build": build, "advisor": advisor, "surface": surface, "case": case, "run": run}
    return {**head, "repeat": rep, "command": "advisor suggest " + shlex.join(args), **row}


def _say(r: dict[str, Any]) -> None:
    """One line per run on stderr as it ends (a GPT-2 Large run takes minutes)."""
    head = f"[{r['build']}] {r['surface']} {r['case']} {r['run']}:"
    if not r.get("ok"):
        print(f"{head} FAILED: {(r.get('error') or '').strip()[-300:]}", file=sys.stderr)
        return
    print(
        f"{head} first {r['first_s']:.1f} s{'' if r['early_first_answer'] else ' (the report)'}, "
        f"final {r['final_s']:.1f} s, command {r['exit_s']:.1f} s, CPU {r['cpu_s']:.1f} s, "
        f"peak RSS {r['peak_rss_mb'] / 1e3:.2f} GB, load {r['load_before'][0]:.1f}->"
        f"{r['load_after'][0]:.1f} ({r['cores']} cores)",
        file=sys.stderr,
        flush=True,
    )


def _spread(xs: list[float], scale: float = 1.0, fmt: str = "{:.1f}") -> str:
    if not xs:
        return "-"
    ys = sorted(x / scale for x in xs)
    if len(ys) == 1:
        return fmt.format(ys[0])
    mid = statistics.median(ys)
    return " / ".join(fmt.format(y) for y in (ys[0], mid, ys[-1]))


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def _groups(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault((r["build"], r["surface"], r["case"], r["run"]), []).append(r)
    return out


def _memory(r: dict[str, Any]) -> float | None:
    """The memory a run is judged by: the command's tree locally, the service's trees on it."""
    return r.get("service_peak_rss_mb") if "service_peak_rss_mb" in r else r.get("peak_rss_mb")


def verdicts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each goal of each (build, surface, case) measured: its median, the runs, met or not
    (``--quick`` rows are judged by none: a reduced space)."""
    out = []
    for (build, surface, case, run), rs in _groups([r for r in rows if not r.get("quick")]).items():
        ok = [r for r in rs if r.get("ok")]
        for (gcase, grun, figure), goal in GOALS.items():
            if (gcase, grun) != (case, run):
                continue
            xs = [_memory(r) if figure == "peak_rss_mb" else r.get(figure) for r in ok]
            values = [float(x) for x in xs if x is not None]
            median = statistics.median(values) if values else None
            out.append({
                "build": build, "surface": surface, "case": case, "run": run, "figure": figure,
                "goal": goal, "median": median, "runs": len(values), "failed": len(rs) - len(ok),
                "met": median is not None and median <= goal and len(ok) == len(rs),
            })  # fmt: skip
    return out


def markdown(rows: list[dict[str, Any]], commands: list[str], prof: dict[str, Any] | None) -> str:
    quick = any(r.get("quick") for r in rows)
    cores = sorted({r["cores"] for r in rows if r.get("cores")})
    lines = [
        "Commands: " + "; ".join(f"`{c}`" for c in commands) + ".",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.machine()}, Python "
        f"{platform.python_version()}, {'/'.join(map(str, cores)) or os.cpu_count()} cores. "
        "Each cell: min / median / max over the runs (one value: one run). Seconds from the "
        'command\'s start: to the first answer (the "first answer" block; without one, the '
        "report), to the final answer (the report), to the command's exit. CPU: the command "
        "and its reaped children (on the service also the server's and worker's, after the "
        "+). Peak RSS: summed over the process tree, sampled every 50 ms (on the service: the "
        "client + the server and worker trees); main / largest, medians: the command's own "
        "process's peak (its VmHWM, sampled) / wait4's ru_maxrss (the largest process of its "
        "tree). "
        "Load: the 1-minute load average before -> after each run.",
        "",
        "| build | surface | model | run | n | first answer s | final answer s | command s "
        "| CPU s | peak RSS GB | main / largest GB | load | cores |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (build, surface, case, run), rs in _groups(rows).items():
        ok = [r for r in rs if r.get("ok")]
        if not ok:
            err = (rs[0].get("error") or "?").strip().splitlines()
            last = err[-1] if err else "?"
            last = last if len(last) <= 240 else last[:237] + "..."
            lines.append(f"| {build} | {surface} | {case} | {run} | 0 | failed: {last} "
                         "| | | | | | | |")  # fmt: skip
            continue
        cpu = _spread([r["cpu_s"] for r in ok])
        if "service_cpu_s" in ok[0]:
            cpu += " + " + _spread([r["service_cpu_s"] for r in ok])
        rss = _spread([r["peak_rss_mb"] for r in ok], 1e3, "{:.2f}")
        if "service_peak_rss_mb" in ok[0]:
            rss += " + " + _spread([r["service_peak_rss_mb"] for r in ok], 1e3, "{:.2f}")
        loads = ", ".join(f"{r['load_before'][0]:.1f}->{r['load_after'][0]:.1f}" for r in ok)
        early = sum(r["early_first_answer"] for r in ok)
        first = _spread([r["first_s"] for r in ok]) + ("" if early else " (report)")
        lines.append(
            f"| {build} | {surface} | {case} | {run} | {len(ok)}"
            f"{f' ({len(rs) - len(ok)} failed)' if len(rs) > len(ok) else ''} | {first} | "
            f"{_spread([r['final_s'] for r in ok])} | {_spread([r['exit_s'] for r in ok])} | "
            f"{cpu} | {rss} | {_median([r['main_hwm_mb'] for r in ok]) / 1e3:.2f} / "
            f"{_median([r['ru_maxrss_mb'] for r in ok]) / 1e3:.2f} | "
            f"{loads} | {ok[0]['cores']} |"
        )
    vs = verdicts(rows)
    if vs:
        lines += ["", "| goal (issue #46) | median | met |", "|---|---|---|"]
        for v in vs:
            unit = " GB" if v["figure"] == "peak_rss_mb" else " s"
            scale = 1e3 if v["figure"] == "peak_rss_mb" else 1.0
            med = "-" if v["median"] is None else f"{v['median'] / scale:.2f}{unit}"
            failed = f", {v['failed']} failed" if v["failed"] else ""
            lines.append(
                f"| {v['build']}, {v['surface']}, {v['case']} {v['run']}: {FIGURES[v['figure']]} "
                f"<= {v['goal'] / scale:g}{unit} | {med} ({_runs(v['runs'])}{failed}) | "
                f"{'met' if v['met'] else '**not met**'} |"
            )
    if quick:
        lines += ["", "(--quick rows: a reduced space, no goal judged.)"]
    lines += _ratios(rows)
    footers = [(r["case"], r["surface"], r["footer"]) for r in rows
               if r.get("ok") and r.get("run") == "cold" and r.get("footer")]  # fmt: skip
    if footers:
        lines += [
            "",
            "The reports' own last lines (cold runs: what took the time, as the report says it):",
            "",
        ]
        lines += [f"- {case}, {surface}: `{footer}`" for case, surface, footer in footers]
    if prof is not None:
        lines += ["", profile_markdown(prof)]
    return "\n".join(lines)


def _ratios(rows: list[dict[str, Any]]) -> list[str]:
    """With ``--other``: each median of the other build over this one's, the same runs."""
    groups = _groups([r for r in rows if r.get("ok")])
    out = []
    for (build, surface, case, run), rs in groups.items():
        mine = groups.get(("this", surface, case, run))
        if build != "other" or not mine:
            continue
        parts = [
            f"{FIGURES[k]} x{_median([r[k] for r in rs]) / _median([r[k] for r in mine]):.2f}"
            for k in ("first_s", "final_s", "exit_s")
            if _median([r[k] for r in mine]) > 0
        ]
        out.append(f"- {surface}, {case} {run}: " + ", ".join(parts))
    return ["", "Other build / this build (medians, the same invocation):", "", *out] if out else []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--cases", default="fcn,gpt2-large", help=f"of {', '.join(CASES)}")
    p.add_argument("--surfaces", default="local,service", help="local, service, or none")
    p.add_argument("--service", choices=("worker", "inprocess"), default="worker")
    p.add_argument("--repeat", type=int, default=3, help="cold + resumed pairs per case")
    p.add_argument("--advisor", default=shutil.which("advisor") or "advisor")
    p.add_argument("--other", help="another advisor executable, timed alternately")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds a run may take")
    p.add_argument("--profile", action="store_true", help="one cold fcn run under pyinstrument")
    p.add_argument("--quick", action="store_true", help="fcn on a reduced space, once, local")
    p.add_argument("--json", type=Path, help="write the rows here")
    p.add_argument("--merge", type=Path, nargs="*", default=[], help="rows of earlier --json")
    p.add_argument("--write-docs", action="store_true", help=f"update {SECTION!r}")
    p.add_argument("--label", help="write the section as '## Advice speed (issue #46, LABEL)'")
    p.add_argument("--backend", help=argparse.SUPPRESS)  # replay:TABLE.json (the smoke test)
    a = p.parse_args(argv)
    cases = [c for c in a.cases.split(",") if c]
    surfaces = [s for s in a.surfaces.split(",") if s and s != "none"]
    if unknown := [c for c in cases if c not in CASES] + [
        s for s in surfaces if s not in ("local", "service")
    ]:
        p.error(f"unknown: {', '.join(unknown)}")
    extra = ["--backend", a.backend] if a.backend else []
    repeat = a.repeat
    tmp = Path(tempfile.mkdtemp(prefix="advisor-speed-space-"))
    if a.quick:
        (tmp / "quick.yaml").write_text(QUICK_SPACE)
        cases, repeat = ["fcn"], 1
        surfaces = surfaces if a.surfaces != "local,service" else ["local"]
    case_args = {c: list(CASES[c]) for c in cases}
    if a.quick and not a.backend:  # a replay table is its own space
        case_args["fcn"] += ["--space", str(tmp / "quick.yaml"), *QUICK_ARGS]
    builds = [("this", a.advisor)] + ([("other", a.other)] if a.other else [])
    rows: list[dict[str, Any]] = []
    for path in a.merge:
        rows += json.loads(path.read_text())["rows"]
    try:
        for rep in range(repeat):
            for build, exe in builds:  # alternately: both builds see the same machine
                for case in cases:
                    args = case_args[case]
                    if "local" in surfaces:
                        rows += run_local(exe, build, case, [*args, *extra], a.timeout, rep)
                    if "service" in surfaces:
                        rows += run_service(
                            exe, build, case, args, a.timeout, rep, a.service, a.backend
                        )
        prof = None
        if a.profile:
            prof = profile(a.advisor, [*CASES["fcn"], *extra], _env(), ROOT, 15, a.timeout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for r in rows:
        r.setdefault("quick", a.quick)
    command = "python benchmarks/suggest_speed.py " + shlex.join(argv or sys.argv[1:])
    commands = sorted({command, *(c for f in a.merge for c in _commands(f))})
    text = markdown(rows, commands, prof)
    section = SECTION if not a.label else f"## Advice speed (issue #46, {a.label})"
    doc = {"commands": commands, "rows": rows, "verdicts": verdicts(rows),
           "profile": prof}  # fmt: skip
    publish(section, text, a.write_docs, doc, a.json)
    return 0


def _commands(path: Path) -> list[str]:
    return list(json.loads(path.read_text()).get("commands") or [])


if __name__ == "__main__":
    raise SystemExit(main())
