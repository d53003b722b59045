"""Issue #49: ``advisor.suggest(..., max_nodes=N)`` on the real scorer (``LocalBackend``, the
one prediction path) with fake local probes: a hand-built step heavy enough (an 8-layer
8192-wide MLP, traced at every per-GPU batch) that a p5.48xlarge's training time falls on
two machines. With ``max_nodes=4`` the rows on 2 and 4 machines are candidates, carry their
node count into the report, the export and the reasons other counts lost; with the default
(1) they are not, and the report's line names the faster node count."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from advisor.probes.operators import with_operator_trace
from advisor.probes.result import ProbeRequest, ProbeResult
from perf_fixtures import mlp_trace, probe

from advisor.prediction.memory.model import GIB

MODEL = "trace_user_models:build_wide_linear"  # importable, never built here
BATCHES = (64, 512)


def _step(batch: int) -> Any:
    t = mlp_trace(batch, 8192, 8, workload=MODEL)
    memory = {"parameters": 2 * GIB, "gradients": 2 * GIB, "optimizer_state": 0,
              "activations": GIB * batch / 2}  # fmt: skip
    return dataclasses.replace(t, memory_bytes=memory)


def _probe(r: ProbeRequest) -> ProbeResult:
    base = probe(batch=r.batch_size, t2=2.0, workload=MODEL)
    fp = {"data_s": 1e-6 * r.batch_size, "input_bytes_per_sample": 1024.0}
    return with_operator_trace(dataclasses.replace(base, fingerprint=fp), _step(r.batch_size))


def _suggest(tmp_path: Path, max_nodes: int) -> dict[str, Any]:
    from advisor.search_spaces.loader import load_space

    import advisor
    from advisor.evaluation.local import LocalBackend
    from advisor.prediction.step import traces

    for b in (2, 4, 8, 16, 32, 64, 128, 256, 512):  # each per-GPU batch, never traced here
        traces.remember(traces.trace_key(MODEL, "torch", b, {}), _step(b))
    url = f"sqlite:///{tmp_path / f'n{max_nodes}.db'}"
    space = load_space(
        f"workload: {MODEL}\nbatch_sizes: {list(BATCHES)}\n"
        "machines:\n  instance_types: [ec2:p5.48xlarge, ec2:g5.xlarge]\n",
        MODEL,
    )
    return advisor.suggest(
        model=MODEL, space=space, n_train=10_000_000, n_val=100, epochs=1, budget_usd=1e6,
        local=False, storage=url, backend=LocalBackend(url, run_probe=_probe), spot=False,
        plan="checkpointing=none,sharding=none,accumulation=1", precision="fp32",
        max_nodes=max_nodes,
    )  # fmt: skip


def _text(report: dict[str, Any]) -> str:
    from rich.console import Console

    from advisor.report.render import render

    out = io.StringIO()
    render(report, Console(file=out, width=240), verbose=True)
    return " ".join(out.getvalue().split())


@pytest.mark.slow  # about 25 s: two studies on the kernel model
def test_node_counts_are_candidates_only_when_asked(tmp_path: Path) -> None:
    from advisor.export.api import export

    one, four = _suggest(tmp_path, 1), _suggest(tmp_path, 4)
    assert {r["nodes"] for r in one["ranking"]} == {1}
    assert one["recommended"]["machine"] == "ec2:p5.48xlarge"
    # the default study tried one machine; the report says where two would have been faster
    better = one["nodes"]["better"]
    assert better and better[0]["nodes"] > 1
    assert better[0]["runtime_s"] < one["recommended"]["runtime_s"]["value"]
    assert "faster" in better[0]["text"] and f"--max-nodes {better[0]['nodes']}" in _text(one)

    rows = {(r["machine"], r["batch_size"]): r for r in four["ranking"]}
    assert {r["nodes"] for r in four["ranking"]} == {1, 2, 4}
    two = rows[("ec2:p5.48xlarge:x2", 512)]
    alone = rows[("ec2:p5.48xlarge", 512)]
    assert two["instance_type"] == "p5.48xlarge" and two["price_per_hour"] == pytest.approx(
        2 * alone["price_per_hour"]
    )
    assert two["training_s"]["value"] < alone["training_s"]["value"]  # the step is split
    assert two["startup_s"]["value"] > alone["startup_s"]["value"]  # the slowest of two boots
    assert 0 < two["across_share"] < 1
    assert four["left_out"]["one machine only (no cited network figure)"] == ["ec2:g5.xlarge"]
    lost = four["nodes"]["lost"]
    mine = four["recommended"]["nodes"]
    assert sorted(x["nodes"] for x in lost) == sorted({1, 2, 4} - {mine})
    assert "other node counts lost: " in _text(four)
    # the row on two machines is exported with its node count (SkyPilot's num_nodes)
    n = next(i for i, r in enumerate(four["ranking"], 1) if r["machine"] == two["machine"])
    task = yaml.safe_load(export("skypilot", report=four, row=n).text)
    assert task["num_nodes"] == 2 and task["run"].startswith("torchrun ")
