"""Sharded data parallel runs for real (issue #35): ZeRO-1 (DDP + ZeroRedundancyOptimizer),
ZeRO-2 and ZeRO-3 (FSDP2) in two CPU processes over gloo, as ``python -m advisor.train`` runs
them on a multi-GPU machine. The loss goes down, and the bytes each process holds move the
way the sharding rules say (``plan_memory.factor_memory``: 1/n of what each ZeRO stage
shards; the traced step against the real one: ``tests/prediction/memory/test_plan.py``)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest
import sharded_steps as S

from advisor.prediction.memory.model import MemoryTerm, StepMemory
from advisor.prediction.memory.plan import factor_memory
from advisor.prediction.step.plan import parse_plan

PLANS = {
    "optimizer": "sharding=optimizer",
    "gradients": "sharding=gradients",
    "parameters": "sharding=parameters,precision=bf16,accumulation=2,checkpointing=blocks",
}
STATE = ("parameters", "gradients", "optimizer_state")


def _spawn(worker: Any, *args: Any) -> list[Any]:
    import torch.multiprocessing as mp

    from advisor.train.device import free_port

    queue = multiprocessing.get_context("spawn").SimpleQueue()
    with pytest.MonkeyPatch.context() as mpatch:  # a fresh rendezvous for this run
        mpatch.setenv("MASTER_ADDR", "127.0.0.1")
        mpatch.setenv("MASTER_PORT", str(free_port()))
        mp.spawn(worker, args=(*args, queue), nprocs=2, join=True)
    return [queue.get() for _ in range(2)]


def _model(plan_text: str, params: int) -> dict[str, tuple[float, float]]:
    """The memory model's (value, high) bytes of each state term per process, two GPUs, from
    the float32 step's: parameters P, gradients P, Adam's two moments 2P."""
    base = StepMemory(S.BATCH, tuple(MemoryTerm(name, b, b, b, "measured") for name, b in
                                     (("parameters", params), ("gradients", params),
                                      ("optimizer_state", 2 * params))))  # fmt: skip
    terms = {t.name: t for t in factor_memory(base, parse_plan(plan_text), devices=2).terms}
    gathered = terms.get("gathered_unit")
    return {
        name: (terms[name].value,
               terms[name].high + (gathered.high if gathered and name == "parameters" else 0))
        for name in STATE
    }  # fmt: skip


@pytest.mark.slow
def test_each_sharded_plan_trains_and_holds_what_the_memory_model_says() -> None:
    results = dict(_spawn(S.worker, list(PLANS.values())))
    params = S.local_bytes(S.setup().model.parameters())
    for text in PLANS.values():
        for rank in (0, 1):
            got = results[rank][text]
            losses = got["losses"]
            assert losses[-1] < 0.7 * losses[0], (text, rank, losses)
            for name, (value, high) in _model(text, params).items():
                # exact where the model has no prior; Adam's step counters (one scalar per
                # tensor) and ZeRO-1's by-tensor partition within 15 %
                assert 0.85 * value <= got[name] <= 1.15 * high, (text, rank, name, got, value)
    held = {s: results[0][t]["parameters"] for s, t in PLANS.items()}
    total = {s: sum(results[0][t][n] for n in STATE) for s, t in PLANS.items()}
    assert held["parameters"] <= 0.55 * held["optimizer"]  # ZeRO-3 holds half the weights
    assert held["gradients"] == held["optimizer"] == params  # ZeRO-1/2 keep them whole
    assert total["parameters"] < total["gradients"] < total["optimizer"]


def _entry(folder: Path, plan: str, epochs: int) -> dict[str, Any]:
    """``python -m advisor.train``'s multi-process path (``_rank_main`` on two CPU processes
    over gloo, as on a machine with two GPUs) on the built-in ``fcn`` with Adam."""
    from advisor.train.device import DevicePlan, free_port, spawn
    from advisor.train.entry import _rank_main, parse_args

    args, hps = parse_args(["--model", "fcn", "--batch-size", "32", "--n-train", "128",
                            "--n-val", "32", "--threads", "1", "--epochs", str(epochs),
                            "--lr", "0.01", "--optimizer", "adam", "--device", "cpu",
                            "--checkpoint-dir", str(folder), "--plan", plan])  # fmt: skip
    queue = multiprocessing.get_context("spawn").SimpleQueue()
    with pytest.MonkeyPatch.context() as mpatch:  # a fresh rendezvous for this run
        mpatch.setenv("MASTER_ADDR", "127.0.0.1")
        mpatch.setenv("MASTER_PORT", str(free_port()))
        spawn(_rank_main, DevicePlan("cpu", 2, "test: two processes"), args, hps, queue)
    summary: dict[str, Any] = queue.get()
    return summary


@pytest.mark.slow
@pytest.mark.parametrize(
    ("plan", "by_name"),
    [("sharding=optimizer", False), ("sharding=parameters,precision=bf16", True)],
    ids=["zero1", "zero3"],
)
def test_python_m_advisor_train_runs_sharded_checkpoints_the_whole_model_and_resumes(
    tmp_path: Path, plan: str, by_name: bool
) -> None:
    """ZeRO-1 and ZeRO-3 through the launcher's path: they train, the checkpoint holds the
    whole model and optimizer state (gathered from the processes: ZeRO-1's by position,
    FSDP's by parameter name), and a second run resumes from it with the optimizer state
    carried into the sharded optimizer (Adam's step count goes on from 4 to 8)."""
    import torch
    from advisor.probes.torch_loop import build_setup

    first = _entry(tmp_path, plan, epochs=1)
    assert first["epochs_run"] == 1 and first["iterations"] == 4  # 128 / 2 processes / 16
    state = torch.load(tmp_path / "advisor-checkpoint.pt", weights_only=False)
    assert state["epochs_done"] == 1 and state["optimizer_by_name"] is by_name
    whole, _, _ = build_setup("fcn", 32, 128, 32, seed=0, hyperparameters={"lr": 0.01})
    sizes = {k: v.shape for k, v in state["model"].items()}
    assert sizes == {k: v.shape for k, v in whole.model.state_dict().items()}
    moments = state["optimizer"]["state"]
    assert len(moments) == len(list(whole.model.parameters()))  # every parameter's
    assert {int(s["step"]) for s in moments.values()} == {4}
    second = _entry(tmp_path, plan, epochs=2)
    assert second["resumed_from"] == 1 and second["epochs_run"] == 1
    state = torch.load(tmp_path / "advisor-checkpoint.pt", weights_only=False)
    assert state["epochs_done"] == 2
    assert {int(s["step"]) for s in state["optimizer"]["state"].values()} == {8}
