"""Issue #49: the report's lines about node counts (``advisor.report.nodes``), on hand-made
rows: the --max-nodes 1 line naming a faster count and its gain, and with --max-nodes 4 the
short reason each other count lost (slower, over the budget, nothing that fits)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from advisor.evaluation.contract import Evaluation
from advisor.intervals import Interval
from advisor.options import SuggestOptions
from advisor.report.nodes import lines, section

P5 = "ec2:p5.48xlarge"


def _row(machine: str, t: float, c: float, feasible: bool = True, **kw: Any) -> dict[str, Any]:
    nodes = int(machine.rpartition(":x")[2]) if ":x" in machine else 1
    return {"machine": machine, "batch_size": 512, "runtime_s": {"value": t},
            "cost_usd": {"value": c}, "feasible": feasible, "nodes": nodes, **kw}  # fmt: skip


def _ev(machine: str, t: float, c: float) -> Evaluation:
    return Evaluation(machine=machine, batch_size=512, source="modelled", epochs=1,
                      price_per_hour=1.0, spot=False, probe_s=0.0,
                      runtime=Interval(t, t, t), cost=Interval(c, c, c))  # fmt: skip


def _outcome(max_nodes: int, keys: list[str], more: list[Evaluation] = ()) -> Any:  # type: ignore[assignment]
    options = SuggestOptions(model="fcn", budget_usd=50.0, max_nodes=max_nodes)
    return SimpleNamespace(options=options, objective="time", more_nodes=list(more),
                           candidates=[SimpleNamespace(key=k) for k in keys])  # fmt: skip


def test_one_machine_study_names_the_faster_node_count() -> None:
    rec = _row(P5, 600.0, 10.0)
    more = [_ev(f"{P5}:x2", 400.0, 14.0), _ev(f"{P5}:x4", 300.0, 60.0)]  # x4: over budget
    s = section(_outcome(1, [P5], more), rec, [rec])
    assert s is not None and [b["nodes"] for b in s["better"]] == [2]
    (line,) = lines({"nodes": s})
    assert line.startswith("On 2 machines: 2 x ec2:p5.48xlarge at batch 512 would take")
    assert "(33% faster)" in line and "(40% dearer)" in line and "--max-nodes 2" in line
    # nothing faster or cheaper within the limits: no line at all
    assert section(_outcome(1, [P5], [_ev(f"{P5}:x2", 700.0, 20.0)]), rec, [rec]) is None


def test_several_machine_study_says_why_the_other_counts_lost() -> None:
    rec = _row(f"{P5}:x2", 400.0, 14.0, across_share=0.05)
    rows = [rec, _row(P5, 600.0, 10.0), _row(f"{P5}:x4", 300.0, 60.0, feasible=False)]
    keys = [P5, f"{P5}:x2", f"{P5}:x4", "ec2:g5.xlarge:x8"]
    s = section(_outcome(8, keys, []), rec, rows)
    assert s is not None
    reasons = {x["nodes"]: x["reason"] for x in s["lost"]}
    assert reasons[1].startswith(
        "1 machine: 1.50x slower (ec2:p5.48xlarge batch 512: 10.0 min, USD 10)"
    )
    assert reasons[4].startswith("4 machines: over the budget of USD 50")
    assert reasons[8].startswith("8 machines: no candidate scored")
    assert lines({"nodes": s})[0].startswith("other node counts lost: 1 machine: 1.50x slower")
