"""Issue #37: the report says whether renting beats owning for this job, and by how much, for
each machine you own (ranked by the study's own rule), with the owned machine's price formula."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from advisor.probes.result import Interval
from advisor.providers import catalog
from advisor.providers.owned import OwnedMachine
from cli_run import run
from export_study import table

from advisor.evaluation.replay import ReplayEntry, ReplayTable

RENTED = "ec2:g5.12xlarge"


def _report(tmp_path: Path, purchase_usd: float, *args: str) -> dict[str, Any]:
    """The export study's machines plus an owned 4 x A10G rig of the rented g5.12xlarge's run
    times (same boards), bought for ``purchase_usd``."""
    base = table()
    rig = OwnedMachine("rig", "A10G", 4, purchase_usd, 3 * 8766.0, 1800.0, 0.30)
    times = {e.batch_size: e.runtime for e in base.entries if e.machine == RENTED}
    entries = tuple(
        ReplayEntry("owned:rig", b, Interval(t.value, t.low, t.high),
                    predicted=Interval(t.value * 1.1, t.value * 0.8, t.value * 1.4), probe_s=30.0)
        for b, t in times.items()
    )  # fmt: skip
    owned = ReplayTable(
        (*base.instances, rig.instance(catalog.load().accelerators)),
        (*base.entries, *entries), snapshot=base.snapshot, epochs=10,
    )  # fmt: skip
    owned.save(tmp_path / "t.json")
    (tmp_path / "s.yaml").write_text("workload: fcn\nbatch_sizes: [256, 512]\n")
    result = run(
        "suggest", "--model", "fcn", "--space", str(tmp_path / "s.yaml"), "--trials", "2",
        "--backend", f"replay:{tmp_path / 't.json'}", "--storage", f"sqlite:///{tmp_path / 's.db'}",
        "--json", *args,
    )  # fmt: skip
    assert result.code == 0, result
    report: dict[str, Any] = json.loads(result.out)
    return report


def test_a_cheap_rig_beats_renting_on_cost(tmp_path: Path) -> None:
    report = _report(tmp_path, 2000.0, "--objective", "cost")
    (entry,) = report["owned"]
    assert entry["machine"] == "owned:rig" and entry["renting_wins"] is False
    assert entry["verdict"].startswith("owning beats renting for this job")
    assert "USD 2,000" in entry["price_formula"] and "kWh" in entry["price_formula"]
    own = next(r for r in report["ranking"] if r["machine"] == "owned:rig")
    assert own["price_basis"] == "owned" and own["startup_s"]["value"] == 0.0


def test_a_dear_rig_loses_to_renting_and_says_by_how_much(tmp_path: Path) -> None:
    report = _report(tmp_path, 500_000.0, "--objective", "cost")
    (entry,) = report["owned"]
    assert entry["renting_wins"] is True
    gap = entry["owned"]["cost_usd"] - entry["rented"]["cost_usd"]
    assert gap > 0 and f"USD {gap:,.2f}" in entry["verdict"]
    assert entry["verdict"].startswith("renting beats owning for this job")


def test_no_owned_machine_no_section(tmp_path: Path) -> None:
    table().save(tmp_path / "t.json")
    (tmp_path / "s.yaml").write_text("workload: fcn\nbatch_sizes: [256, 512]\n")
    result = run(
        "suggest", "--model", "fcn", "--space", str(tmp_path / "s.yaml"), "--trials", "1",
        "--backend", f"replay:{tmp_path / 't.json'}", "--storage", f"sqlite:///{tmp_path / 's.db'}",
        "--json",
    )  # fmt: skip
    assert json.loads(result.out)["owned"] is None
