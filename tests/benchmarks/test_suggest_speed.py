"""benchmarks/suggest_speed.py (issue #46): the answers are read from a command's stdout as
the report prints them, the goals are judged from the rows, and ``--quick`` runs the real
command and writes every promised field (no timing is asserted: speed is the benchmark's)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
ADVISOR = str(Path(sys.executable).parent / "advisor")


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))  # the benchmark imports its sibling modules by name
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


speed = _load("suggest_speed")
proc = _load("suggest_speed_proc")
prof = _load("suggest_speed_profile")

# What `advisor suggest --model fcn --budget 5` prints on stdout (README.md, shortened).
STDOUT = """\
first answer (from the operator trace: GPU machines only, their init a prior; the local probes
  run now, the final answer follows)
  recommended: ec2:g4dn.xlarge:spot batch 1024: 2.8 min (1.0-8.2), USD 0.010 (0.004-0.029)
  then: ec2:g4dn.2xlarge:spot batch 1024: 2.8 min (1.0-8.2), USD 0.011 (0.004-0.034)

fcn (torch): fastest run within USD 5; 1468 candidates, catalog 2026-11
recommended: ec2:g4dn.xlarge spot (1x T4), batch 2048, 16 epochs
  plan: fp16 with loss scaling; memory 2.0 of 16.0 GiB per device
1 trial, converged, 305.3 s - study advisor-fcn-torch-time-36c11b54
More: --verbose, --json, `advisor dashboard`
"""

ROW_FIELDS = {
    "build", "advisor", "surface", "case", "run", "repeat", "command", "quick", "rc", "ok",
    "timed_out", "first_s", "early_first_answer", "final_s", "exit_s", "cpu_s", "cpu_user_s",
    "cpu_sys_s", "peak_rss_mb", "peak_procs", "main_hwm_mb", "ru_maxrss_mb", "load_before",
    "load_after", "cores", "recommended", "first_recommended", "footer", "error",
}  # fmt: skip


def _watch(text: str) -> Any:
    watch = proc.AnswerWatch()
    for i, line in enumerate(text.splitlines(keepends=True)):
        watch.feed(line, float(i))
    return watch


def test_the_first_answer_block_then_the_report() -> None:
    w = _watch(STDOUT)
    assert (w.first_s, w.early, w.final_s) == (0.0, True, 5.0)
    assert w.first_recommended.startswith("ec2:g4dn.xlarge:spot batch 1024")
    assert w.recommended == "ec2:g4dn.xlarge spot (1x T4), batch 2048, 16 epochs"
    assert w.footer.startswith("1 trial, converged, 305.3 s")


def test_without_the_block_the_report_is_the_first_answer() -> None:
    w = _watch(STDOUT.split("\n\n", 1)[1])
    assert (w.first_s, w.early, w.final_s) == (0.0, False, 0.0)
    assert w.recommended.startswith("ec2:g4dn.xlarge spot")


def _row(case: str, run: str, **figures: float) -> dict[str, object]:
    base = {"build": "this", "surface": "local", "case": case, "run": run, "ok": True}
    base |= {"first_s": 1.0, "final_s": 1.0, "exit_s": 1.0, "peak_rss_mb": 100.0}
    return base | figures


def test_goals_are_judged_by_the_median_and_a_failed_run_fails_them() -> None:
    rows = [_row("fcn", "cold", first_s=x, final_s=20.0) for x in (4.0, 6.0, 4.5)]
    rows += [_row("fcn", "resumed", exit_s=x) for x in (0.5, 0.8)]
    rows += [{**_row("fcn", "resumed"), "ok": False}]
    got = {(v["run"], v["figure"]): v for v in speed.verdicts(rows)}
    assert got["cold", "first_s"]["median"] == 4.5 and got["cold", "first_s"]["met"]
    assert got["cold", "final_s"]["met"] and got["cold", "peak_rss_mb"]["met"]
    resumed = got["resumed", "exit_s"]
    assert resumed["median"] == 0.65 and resumed["failed"] == 1 and not resumed["met"]
    assert speed.verdicts([{**r, "quick": True} for r in rows]) == []


def test_top_frames_count_recursion_once_and_leave_wrappers_out() -> None:
    def f(name: str, t: float, *kids: dict[str, object]) -> dict[str, object]:
        return {"function": name, "file_path_short": "x.py", "line_no": 1, "time": t,
                "children": list(kids)}  # fmt: skip

    # main -> cli (a wrapper) -> suggest: import torch 3 s, screen 5 s (recursing into itself)
    root = f("main", 10.0, f("cli", 10.0, f("suggest", 10.0, f("<module>", 3.0),
             f("screen", 5.0, f("screen", 4.0)))))  # fmt: skip
    frames = {r["frame"].split()[0]: r for r in prof.top_frames(root, 15)}
    assert "cli" not in frames and "main" not in frames  # one callee holds all their time
    assert frames["suggest"]["cumulative_s"] == 10.0 and frames["suggest"]["self_s"] == 2.0
    assert frames["screen"]["cumulative_s"] == 5.0 and frames["screen"]["share"] == 0.5
    assert list(frames)[:2] == ["suggest", "screen"]


def _check_rows(doc: dict[str, object], surface: str) -> None:
    rows = doc["rows"]
    assert [(r["surface"], r["run"]) for r in rows] == [(surface, "cold"), (surface, "resumed")]
    for r in rows:
        assert r["ok"], r["error"]
        assert set(r) >= ROW_FIELDS, ROW_FIELDS - set(r)
        assert r["first_s"] <= r["final_s"] <= r["exit_s"] and r["cpu_s"] > 0
        assert r["peak_rss_mb"] > 0 and r["cores"] >= 1 and len(r["load_before"]) == 3
        assert r["recommended"]
    assert doc["verdicts"] == []  # --quick judges no goal


@pytest.mark.slow
def test_quick_runs_the_real_command_cold_and_resumed(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    assert speed.main(["--quick", "--advisor", ADVISOR, "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    _check_rows(doc, "local")
    cold = doc["rows"][0]
    assert cold["early_first_answer"] and cold["first_recommended"]  # issue #36's block
    assert "--quick" in doc["commands"][0]


@pytest.mark.slow
def test_quick_on_the_service_with_a_worker(tmp_path: Path) -> None:
    pytest.importorskip("rq")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    from replay_tables import small_table

    table = tmp_path / "table.json"
    small_table().save(table)
    out = tmp_path / "rows.json"
    args = ["--quick", "--surfaces", "service", "--backend", f"replay:{table}"]
    assert speed.main([*args, "--advisor", ADVISOR, "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    _check_rows(doc, "service (worker)")
    for r in doc["rows"]:
        assert r["service_peak_rss_mb"] > 0 and r["service_cpu_s"] >= 0


def test_imports_name_the_package_entered_and_the_call_that_needed_it() -> None:
    def f(name: str, path: str, t: float, *kids: dict[str, object]) -> dict[str, object]:
        return {"function": name, "file_path_short": path, "line_no": 1, "time": t,
                "children": list(kids)}  # fmt: skip

    dynamo = f("<module>", "torch/_dynamo/__init__.py", 4.0, f("<module>", "sympy/x.py", 1.0))
    root = f("<module>", "advisor/cli/main.py", 10.0,
             f("<module>", "torch/__init__.py", 3.0, f("<module>", "torch/nn.py", 1.0)),
             f("make_optimizer", "search_spaces/r.py", 5.0, f("inner", "torch/c.py", 4.5, dynamo)))  # fmt: skip
    got = {r["module"]: r for r in prof.imports(root)}
    assert set(got) == {"torch/__init__.py", "torch/_dynamo/__init__.py", "sympy/x.py"}
    assert got["torch/_dynamo/__init__.py"]["s"] == 4.0  # torch/nn.py: inside torch's own import
    assert got["torch/_dynamo/__init__.py"]["from"].startswith("make_optimizer")
