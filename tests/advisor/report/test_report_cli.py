"""What `advisor suggest` prints and plots (replay back end): the reason, the tuning ranges,
price dates, the plot as PNG and HTML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.cli.main import main

SPACE = (
    "workload: fcn\nbatch_sizes: [256, 512]\nhyperparameters:\n"
    "  lr: {type: float, low: 0.01, high: 0.3, log: true}\n"
)


def _suggest(capsys: pytest.CaptureFixture[str], table_file: Path, *args: str) -> tuple[int, str]:
    try:
        main(["suggest", *args, "--verbose", "--backend", f"replay:{table_file}"])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().out


@pytest.fixture
def space(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLUMNS", "220")
    path = tmp_path / "space.yaml"
    path.write_text(SPACE)
    return path


def test_report_says_why_and_shows_ranges_and_price_dates(
    capsys: pytest.CaptureFixture[str], table_file: Path, space: Path, _advisor_home: Path
) -> None:
    code, out = _suggest(
        capsys, table_file, "--model", "fcn", "--budget", "5", "--space", str(space)
    )
    assert code == 0
    words = " ".join(out.split())
    assert "why: fastest within USD 5" in words
    assert "tuning ranges" in words and "lr 0.01..0.3 log" in words
    assert "lr=" not in words  # no sampled learning rate is presented as advice
    # each price's basis (issue #27: the fixture's rows cite no read-out) and date
    assert "(estimate 2021-02-01)" in words
    assert "[over limit]" in words  # Rich markup does not swallow bracketed text


def test_plot_png_and_html(
    capsys: pytest.CaptureFixture[str], table_file: Path, space: Path, tmp_path: Path
) -> None:
    png = tmp_path / "plot.png"
    code, out = _suggest(
        capsys, table_file, "--model", "fcn", "--deadline", "2h", "--space", str(space),
        "--json", "--plot", str(png),
    )  # fmt: skip
    assert code == 0
    report = json.loads(out)
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 20_000
    html = Path(report["plot_html"])
    assert html == png.with_suffix(".html")
    text = html.read_text()
    # Plotly is inlined (no network at view time) and the recommendation is marked.
    assert '<script src="http' not in text and "recommended: " in text
    assert report["recommended"]["machine"].split(":")[1] in text


def test_progress_names_what_runs(table_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dataclasses import replace

    from advisor.search_spaces.loader import default_space

    from advisor.cli.progress import reporting
    from advisor.cli.suggest import progress_label
    from advisor.evaluation.replay import ReplayBackend, ReplayTable
    from advisor.options import SuggestOptions
    from advisor.pipeline import suggest

    assert progress_label("screen", 24).startswith("screening 24 machine x batch pairs")
    assert progress_label("probing batch 512 locally", 1) == "probing batch 512 locally"
    assert progress_label("probe:probing on ml.g5.xlarge", 1) == "probing on ml.g5.xlarge"
    space = replace(default_space("fcn"), batch_sizes=(256, 512))
    opts = SuggestOptions(model="fcn", space=space, budget_usd=5.0, storage="sqlite:///:memory:")
    with reporting() as progress:  # issue #50: the live line or plain lines, one front
        report = suggest(
            opts, backend=ReplayBackend(ReplayTable.load(table_file)), progress=progress
        )
    assert report["trials"]["new"] >= 1
