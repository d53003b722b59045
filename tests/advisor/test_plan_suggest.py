"""Issue #35: ``advisor suggest`` picks each GPU row's training plan -- the fastest predicted
plan that fits -- records it in the row and names it in the report. The step is
``memory_fixtures``' hand-built one (32 GiB at batch 8: too big for a 16 GB T4, not for an
80 GB H100), scored by the real scorer (``LocalBackend``) on fake local probes."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import memory_fixtures
import pytest
from memory_fixtures import MODEL, remember, sized_probe

fresh_memos = memory_fixtures.fresh_memos  # autouse: the memos forgotten around each test


def _suggest(tmp_path: Path, machine: str, **fields: Any) -> dict[str, Any]:
    from advisor.search_spaces.loader import load_space

    import advisor
    from advisor.evaluation.local import LocalBackend

    url = f"sqlite:///{tmp_path / 'study.db'}"
    remember(1, 2, 4, 8)  # the steps at each micro-batch, never traced for real
    space = load_space(
        f"workload: {MODEL}\nbatch_sizes: [8]\nmachines:\n  instance_types: [{machine}]\n",
        MODEL,
    )
    backend = LocalBackend(url, run_probe=lambda r: sized_probe(r.batch_size, t2=2.0))
    return advisor.suggest(
        model=MODEL, space=space, n_train=1000, n_val=100, budget_usd=1e6, local=False,
        storage=url, backend=backend, spot=False, **fields,
    )  # fmt: skip


def _text(report: dict[str, Any], verbose: bool = False) -> str:
    from rich.console import Console

    from advisor.report.render import render

    out = io.StringIO()
    render(report, Console(file=out, width=200), verbose=verbose)
    return " ".join(out.getvalue().split())


@pytest.mark.slow  # about 5 s: two small studies with the kernel model
def test_a_row_that_needs_accumulation_is_recommended_with_its_plan(tmp_path: Path) -> None:
    t4 = _suggest(tmp_path / "t4", "ec2:g4dn.xlarge", plan="checkpointing=none", precision="fp32")
    rec = t4["recommended"]
    assert rec is not None and rec["batch_size"] == 8  # the global batch, as asked
    plan = rec["training_plan"]
    assert plan["checkpointing"] == "none" and plan["accumulation"] > 1
    micro = -(-8 // plan["accumulation"])
    assert rec["plan"] == f"fp32, micro-batch {micro} x {plan['accumulation']} accumulation steps"
    from advisor.providers.catalog import load

    from advisor.prediction.memory.priors import usable_gib

    usable, _ = usable_gib(load().accelerator("T4"))  # the board's usable memory, not its 16 GB
    assert f" of {usable:.1f} GiB" in rec["memory"]  # fits the T4 under that plan
    assert rec["runtime_s"]["value"] > 0 and rec["cost_usd"]["value"] > 0
    h100 = _suggest(tmp_path / "h100", "ec2:p5.4xlarge", precision="fp32")
    plain = h100["recommended"]
    assert plain["plan"] is None and plain["training_plan"] is None  # the plain fp32 step
    assert plain["epochs"] == rec["epochs"]  # accumulation leaves the epochs to the target
    text = _text(t4)
    assert f"plan: {rec['plan']}" in text and text.count(rec["plan"]) == 2  # + the ranking's
    assert "plan: fp32" in _text(h100)


@pytest.mark.slow  # about 10 s: three small studies
def test_auto_precision_without_anything_else_when_the_step_fits(tmp_path: Path) -> None:
    """Issue #50: auto is the fastest of the GPU's precisions by the model's own numbers, with
    nothing else added where the step fits."""
    report = _suggest(tmp_path / "auto", "ec2:p5.4xlarge", precision="auto")
    rec = report["recommended"]
    assert rec["training_plan"]["accumulation"] == 1
    assert rec["training_plan"]["checkpointing"] == "none"
    each = {p: _suggest(tmp_path / p, "ec2:p5.4xlarge", precision=p)["recommended"]
            for p in ("tf32", "bf16")}  # fmt: skip
    fastest = min(each, key=lambda p: each[p]["runtime_s"]["value"])
    assert rec["plan"] == fastest, (rec["plan"], {p: r["runtime_s"] for p, r in each.items()})
