"""Issue #50, section 1: what `advisor suggest` and `advisor predict` print reads well at 80
and at 120 columns. At 80 the one-screen report was 29 lines, broke machine names mid-word
over two lines and padded lines with spaces; `predict` wrapped each cell over five lines at
100. Through the CLI with ``COLUMNS`` set: no line longer than the width, none with trailing
spaces, every machine name whole on one line, the one-screen report within 24 lines at 80.
And `predict` without machines says how to name them; `hardware list` has ``--json``."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from cli_run import run
from click.testing import CliRunner
from perf_fixtures import probe, with_synthetic_trace
from replay_tables import entries, instance

from advisor.cli.main import cli, load_command
from advisor.evaluation.replay import ReplayTable

from .conftest import one_line_error

# Machines with long catalog names (the fcn report's top rows), each on demand and spot, and
# this machine.
LONG = {
    ("compute-engine:n1-standard-4+1xT4", 0.55, 0.16, "T4"): (150.0, 148.0),
    ("compute-engine:n1-standard-8+1xT4", 0.73, 0.21, "T4"): (150.0, 148.0),
    ("compute-engine:n1-standard-32+4xV100", 11.44, 3.2, "V100"): (130.0, 128.0),
    ("ec2:g4dn.xlarge", 0.526, 0.21, "T4"): (152.0, 149.0),
    ("ec2:p3.2xlarge", 3.06, 0.92, "V100"): (140.0, 139.0),
}
SPACE = "workload: fcn\nbatch_sizes: [256, 512]\n"


def _suggest_table(folder: Path) -> tuple[Path, Path]:
    gpus = {"T4": 1, "V100": 1}
    insts = [
        instance(key, 4 if "4xV100" in key else gpus[acc], price, spot, acc, "us-east-1")
        for key, price, spot, acc in LONG
    ]
    times = {(m[0], b): t for m, ts in LONG.items() for b, t in zip((256, 512), ts, strict=True)}
    times |= {("local:local", 256): 2000.0, ("local:local", 512): 1900.0}
    table = ReplayTable(
        (*insts, instance("local:local", 0, 0.0, None, None)),
        entries(times),
        snapshot="2021-02",  # a date: its prices are old, a warning line
        epochs=10,
    )
    table.save(folder / "table.json")
    (folder / "space.yaml").write_text(SPACE)
    return folder / "table.json", folder / "space.yaml"


def _lines_fit(text: str, width: int) -> list[str]:
    lines = text.splitlines()
    assert lines, text
    too_long = [line for line in lines if len(line) > width]
    assert not too_long, "\n".join(too_long)
    padded = [line for line in lines if line != line.rstrip()]
    assert not padded, "\n".join(f"{line}|" for line in padded)
    return lines


@pytest.mark.parametrize("width", [80, 120])
def test_suggest_fits_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    table, space = _suggest_table(tmp_path)
    args = ("suggest", "--model", "fcn", "--space", str(space), "--backend", f"replay:{table}")
    monkeypatch.setenv("COLUMNS", str(width))
    done = run(*args, "--budget", "5")
    assert done.code == 0, done
    lines = _lines_fit(done.out, width)
    if width == 80:
        assert len(lines) <= 24, done.out
    report = json.loads(run(*args, "--budget", "5", "--json").out)
    names = [
        row["machine"].removesuffix(":spot") + (" spot" if row["spot"] else "")
        for row in report["ranking"][:5]
    ]
    assert any(len(name) > 24 for name in names)  # the old column folded these
    table_rows = [line for line in lines if line[:1].isdigit() and "  " in line]
    assert len(table_rows) == 5, done.out  # one line per row
    for name, line in zip(names, table_rows, strict=True):
        assert f"  {name}  " in line, (name, line)  # whole, on its row's line
    assert "Prices: " in done.out  # the warning still shows
    assert done.out.rstrip().endswith("`advisor dashboard`")


def _probe_file(folder: Path) -> Path:
    ready = with_synthetic_trace(dataclasses.replace(probe(), fingerprint={"data_s": 0.004}))
    path = folder / "probe.json"
    path.write_text(ready.to_json())
    return path


MACHINES = (
    "ec2:p3.2xlarge,compute-engine:n1-standard-32+4xV100,azure-vm:NC24ads_A100_v4,ec2:g6e.12xlarge"
)


@pytest.mark.parametrize("width", [80, 100, 120])
def test_predict_fits_the_terminal(tmp_path: Path, width: int) -> None:
    args = [
        "predict",
        "-m",
        "fcn",
        "-b",
        "512",
        "-i",
        MACHINES,
        "--probe",
        str(_probe_file(tmp_path)),
    ]
    done = CliRunner(env={"COLUMNS": str(width)}).invoke(cli, args)
    assert done.exit_code == 0, done.output
    lines = _lines_fit(done.output, width)
    rule = next(i for i, line in enumerate(lines) if line.startswith("\u2500"))
    rows = [line.split() for line in lines[rule + 1 : rule + 5]]
    for name in MACHINES.split(","):  # one line per machine, its name whole
        assert sum(name in words for words in rows) == 1, (name, rows)
    assert "job" in lines[rule - 1]  # the job's time stays, whatever the width
    if width < 120:
        assert "left out at" in done.output and "--json shows them" in done.output


def test_predict_without_machines_names_the_fix_and_the_help_says_so() -> None:
    error = one_line_error(run("predict", "-m", "fcn", "-b", "512"))
    assert "--instances" in error and "--gpus" in error and "To fix:" in error
    assert "-i ec2:p3.2xlarge" in error  # an example to copy
    helped = " ".join(CliRunner().invoke(cli, ["predict", "--help"]).output.split())
    assert "The machines are needed: name them with --instances (-i)" in helped
    assert "Needed unless --gpus, --cloud or --region choose the machines" in helped


# Every command that lists things (issue #50: `hardware list` had no --json).
LISTINGS = [
    ("catalog",),
    ("catalog", "accelerators"),
    ("catalog", "snapshots"),
    ("calibration",),
    ("workloads",),
    ("token", "list"),
    ("hardware", "list"),
]


@pytest.mark.parametrize("path", LISTINGS, ids=" ".join)
def test_every_listing_has_json(path: tuple[str, ...]) -> None:
    command = load_command(path[0])
    for name in path[1:]:
        command = command.commands[name]  # type: ignore[attr-defined]
    assert "--json" in {o for p in command.params for o in getattr(p, "opts", [])}


def test_hardware_list_json(tmp_path: Path) -> None:
    assert json.loads(run("hardware", "list", "--json").out) == []
    add = ("hardware", "add", "rig", "--gpus", "4xL40S", "--purchase-usd", "40000",
           "--lifetime", "3y", "--power-w", "1800", "--usd-per-kwh", "0.30")  # fmt: skip
    assert run(*add).code == 0
    (rig,) = json.loads(run("hardware", "list", "--json").out)
    assert rig["key"] == "owned:rig" and rig["count"] == 4 and rig["board"] == "L40S"
    assert rig["usd_per_hour"] == pytest.approx(40000 / (3 * 8766 * 0.5) + 1.8 * 0.30, rel=1e-3)
    assert "per hour of use" in rig["formula"]


REPORT = Path(__file__).parents[1] / "report" / "fixtures" / "fcn_busy_report.json"


@pytest.mark.parametrize("width", [80, 120])
def test_the_busy_fcn_report_fits_with_its_warnings(width: int) -> None:
    """A real run's report (fcn, busy machine: a four-line contention warning and stale
    prices) through the Python API's renderer: within 24 lines at 80 columns, every name
    whole; with three more warnings the screen keeps to 24 lines and counts the rest."""
    import io

    from rich.console import Console

    from advisor.report.render import render

    report = json.loads(REPORT.read_text())

    def draw(rep: dict[str, object]) -> list[str]:
        buf = io.StringIO()
        render(rep, Console(file=buf, width=width, force_terminal=False))
        return _lines_fit(buf.getvalue(), width)

    lines = draw(report)
    assert len(lines) <= 24, "\n".join(lines)
    text = "\n".join(lines)
    assert "compute-engine:n1-standard-4+1xT4 spot" in text and "ran while other" in text
    assert "Prices: 366 of 366 are over 30 days old" in text
    more = dict(
        report,
        probe_failures=[{"text": "2 of 4 batch sizes ran out of memory on this machine " * 2}],
        memory_left_out={"text": "12 machine x batch pairs do not fit in memory " * 3},
    )
    lines = draw(more)
    assert len(lines) <= 24, "\n".join(lines)
    assert "Failed probes:" in "\n".join(lines)  # the first warning always shows
    assert lines[-1].startswith("More: --verbose (") and "more warnings)" in lines[-1]


@pytest.mark.slow
def test_the_real_fcn_report_fits_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """`advisor suggest --model fcn --budget 5` itself (real probes, a fresh ADVISOR_HOME;
    about a minute): the final report within 24 lines at 80 columns, no line longer, none
    padded, the ranking's machine names whole."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "advisor.cli.main", "suggest", "--model", "fcn", "--budget", "5"],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"}, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = _lines_fit(done.stdout, 80)
    final = lines[next(i for i, line in enumerate(lines) if line.startswith("fcn (torch)")) :]
    assert len(final) <= 24, done.stdout
    rows = [line for line in final if line[:1].isdigit() and "  " in line]
    again = subprocess.run(
        [sys.executable, "-m", "advisor.cli.main", "suggest", "--model", "fcn", "--budget", "5",
         "--json"], capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    report = json.loads(again.stdout)  # the same study: its kept answer
    names = [
        row["machine"].removesuffix(":spot") + (" spot" if row["spot"] else "")
        for row in report["ranking"][:5]
    ]
    assert len(rows) == 5
    for name, line in zip(names, rows, strict=True):
        assert f"  {name}  " in line, (name, line)
