"""Issue #35: the training plan of one (machine, batch) is the fastest predicted plan that fits
(``advisor.prediction.forecast.plan_search``). The steps are ``memory_fixtures``' hand-built
traces: 4 GiB of parameters, as much in gradients, 2.75 GiB of activations a sample (30 GiB at
batch 8: more than a 16 GB V100, less than a 40 GB A100). Whether a plan fits is the memory
model's own verdict (``plan_memory``), never a figure written here."""

from __future__ import annotations

import memory_fixtures
import pytest
from memory_fixtures import A100, V100, V100X8, Store, sized_probe
from perf_fixtures import FakeCatalog, gpu_machine

from advisor.prediction.forecast import plan_search
from advisor.prediction.forecast.plan_search import _wall, best_forecast, candidates
from advisor.prediction.step.plan import (
    PrecisionLacking,
    TrainingPlan,
    plan_fields,
    searches,
)

P3DN = gpu_machine("p3dn.24xlarge", "V100", 8, 31.2)  # 8 x V100, a cited network figure
fresh_memos = memory_fixtures.fresh_memos  # autouse: the memos forgotten around each test


def _best(machine, batch=8, **kw):  # type: ignore[no-untyped-def]
    return best_forecast(
        sized_probe(batch), machine, FakeCatalog(), batch, 5, 1000, 100, sweep_epochs=(),
        trace_store=Store(), **kw,
    )  # fmt: skip


def test_a_step_that_fits_keeps_the_plain_plan() -> None:
    row, plan = _best(A100)
    assert row.fits and plan is None  # the float32 step as traced: nothing to add
    assert not row.prediction.plan  # no plan in words: the plain float32 step


def test_a_step_too_big_for_the_gpu_gets_the_fastest_plan_that_fits() -> None:
    plain, _ = _best(V100, fixed=plan_fields("accumulation=1,checkpointing=none,sharding=none"))
    assert plain.fits is False  # the whole batch in one pass: does not fit 16 GB
    row, plan = _best(V100)
    assert row.fits and plan is not None and plan != TrainingPlan()
    assert row.memory is not None and row.memory.per_device_batch == 8  # the global batch kept
    # every other plan of the set that fits is predicted no faster
    best = (row.job_wall_s or row.estimate.runtime).value
    for ckpt in ("none", "blocks"):
        for n in (1, 2, 4, 8):
            fixed = plan_fields(f"accumulation={n},checkpointing={ckpt},sharding=none")
            alt, _ = _best(V100, fixed=fixed)
            if alt.fits:
                assert (alt.job_wall_s or alt.estimate.runtime).value >= best
    assert row.prediction.plan == plan.words(8)


def test_fixed_fields_are_kept_and_the_rest_searched() -> None:
    row, plan = _best(V100, fixed=plan_fields("checkpointing=none"))
    assert row.fits and plan is not None
    assert plan.checkpointing == "none" and plan.accumulation > 1  # accumulation made it fit
    assert plan.micro_batch(8) * plan.accumulation == 8


def test_a_plan_that_fits_nowhere_returns_its_least_memory_row() -> None:
    row, plan = _best(V100, fixed=plan_fields("accumulation=1,checkpointing=none"))
    assert not searches(plan_fields("accumulation=1,checkpointing=none,sharding=none"))
    assert plan is None  # the plain float32 step (accumulation 1, nothing checkpointed or sharded)
    assert row.fits is False


def test_auto_is_the_fastest_precision_that_fits_by_the_models_own_numbers() -> None:
    """Issue #50: ``auto`` weighs the GPU's widest and half precisions row by row and takes
    the faster (bf16's casts can make a launch-bound step slower than tf32)."""
    row, plan = _best(A100, precision="auto")
    assert plan is not None and plan.precision in ("tf32", "bf16") and plan.accumulation == 1
    for other in ("tf32", "bf16"):
        alt, _ = _best(A100, precision=other)
        assert (row.job_wall_s or row.estimate.runtime).value <= (
            alt.job_wall_s or alt.estimate.runtime
        ).value


def test_precision_per_gpu_and_a_gpu_without_it_left_out() -> None:
    with pytest.raises(PrecisionLacking, match="has no bf16"):
        _best(V100, precision="bf16")
    _, plan = _best(V100, precision="auto")  # no bf16 on a V100: fp32 or fp16, the faster
    assert plan is not None and plan.precision in ("fp32", "fp16")


def test_the_plan_set_of_a_machine() -> None:
    base = TrainingPlan("bf16")
    one = {(p.checkpointing, p.sharding) for p in candidates(base, {}, 1)}
    assert one == {("none", "none"), ("blocks", "none")}
    eight = {p.sharding for p in candidates(base, {}, V100X8.accelerator_count)}
    # every sharding advisor.train runs: ZeRO-1 (DDP + ZeroRedundancyOptimizer), ZeRO-2/3 (FSDP2)
    assert eight == {"none", "optimizer", "gradients", "parameters"}
    named = candidates(base, {"sharding": "parameters"}, V100X8.accelerator_count)
    assert {p.sharding for p in named} == {"parameters"}
    assert {p.sharding for p in candidates(base, {}, 8, strategy="dp")} == {"none"}
    keras = candidates(base, {}, 8, framework="keras")
    assert [(p.checkpointing, p.sharding) for p in keras] == [("none", "none")]
    assert plan_fields("accumulate=4,shard=optimizer") == {
        "accumulation": 4, "sharding": "optimizer",
    }  # fmt: skip


def test_on_several_machines_each_fsdp_variant_is_offered_within_them_too() -> None:
    """Issue #49: on N machines each FSDP variant (ZeRO-2/3) is offered sharded over every GPU
    and sharded within each machine, replicated across them (HSDP), HSDP first (it wins the
    bounds' ties: its memory is one machine's, traced for the one-machine rows); ZeRO-1 runs
    over every process (torch's ZeroRedundancyOptimizer) and has no such variant."""
    base = TrainingPlan("bf16")
    one = candidates(base, {}, 8)
    assert {p.replicate for p in one} == {"none"}
    two = candidates(base, {}, 16, nodes=2)
    hsdp = [p for p in two if p.replicate == "nodes"]
    assert {(p.checkpointing, p.sharding) for p in hsdp} == {
        (c, s) for c in ("none", "blocks") for s in ("gradients", "parameters")
    }
    assert two[: len(hsdp)] == hsdp and set(two[len(hsdp) :]) == set(one)
    pinned = candidates(base, {"replicate": "none"}, 16, nodes=2)
    assert {p.replicate for p in pinned} == {"none"}


def test_on_several_machines_the_plan_is_the_exhaustive_searchs_hsdp_included() -> None:
    """Issue #49: on two 8-GPU machines (a cited network figure) the search's plan is the
    least predicted time, parts weighed at ``SIMPLER``, over every variant that fits: each
    checkpointing x sharding, and each FSDP sharding within the machines (HSDP) too."""
    row, plan = _best(P3DN, batch=128, nodes=2)  # 8 a GPU, as on one machine at 64
    assert row.fits and plan is not None

    every = {
        (c, s, r): _weighed(f"checkpointing={c},sharding={s},replicate={r}", P3DN, 128, nodes=2)
        for c in ("none", "blocks")
        for s in ("none", "optimizer", "gradients", "parameters")
        for r in (("none", "nodes") if s in ("gradients", "parameters") else ("none",))
    }
    fitting = {k: v for k, v in every.items() if v is not None}
    assert (plan.checkpointing, plan.sharding, plan.replicate) == min(
        fitting, key=lambda k: fitting[k]
    )


def test_on_several_machines_fsdp_within_each_holds_one_machines_memory() -> None:
    """Issue #49: with ZeRO-3 asked for on two machines, HSDP (sharded within each machine,
    replicated across) sends less over the network than sharding over all 16 GPUs: it is the
    plan where it fits, and its memory per GPU is one machine's at the same per-GPU batch (the
    one-machine rows' trace serves it)."""
    fixed = plan_fields("checkpointing=none,sharding=parameters")
    row, plan = _best(P3DN, batch=128, nodes=2, fixed=fixed)
    assert row.fits and plan is not None and plan.replicate == "nodes"
    one, one_plan = _best(P3DN, batch=64, fixed={**fixed, "accumulation": plan.accumulation})
    assert one_plan is not None and one.memory is not None and row.memory is not None
    assert one.memory.fit.need_bytes == row.memory.fit.need_bytes  # 8 a GPU, sharded over 8
    alone, _ = _best(P3DN, batch=128, nodes=2, fixed={**fixed, "replicate": "none"})
    assert alone.fits and _wall(alone) > _wall(row)  # over all 16: more over the network


def _weighed(fixed: str, machine, batch, **kw) -> float | None:  # type: ignore[no-untyped-def]
    """The job time of the search's plan under ``fixed`` fields, each part it adds weighed at
    ``SIMPLER`` (None: nothing under them fits)."""
    alt, alt_plan = _best(machine, batch=batch, fixed=plan_fields(fixed), **kw)
    if not alt.fits:
        return None
    return _wall(alt) * (1 + plan_search.SIMPLER * plan_search._parts(alt_plan))


def test_a_plan_that_cannot_win_is_never_traced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #46: the variants' memory is traced in the order of their time bounds, until the
    next bound cannot beat the best plan that fits; the answer is the exhaustive search's:
    the least predicted time, each part a plan adds weighed at ``SIMPLER`` (a prior)."""
    from advisor.probes.operators import plan_peak

    traced: list[str] = []

    def counted(workload, plan, *args, **kw):  # type: ignore[no-untyped-def]
        traced.append(f"{plan.checkpointing}/{kw.get('sharding')}/{plan.accumulation > 1}")
        return memory_fixtures.sized_lines(workload, plan, *args, **kw)

    monkeypatch.setattr(plan_peak, "peak_lines", counted)
    row, plan = _best(V100X8, batch=64)  # 8 a GPU: 32 GiB of activations, a 16 GB V100
    assert row.fits and plan is not None
    layouts = 2 * 4 * 2  # checkpointing x sharding x (one micro-step, more)
    assert 0 < len(set(traced)) < layouts, traced

    every = {
        (c, s): _weighed(f"checkpointing={c},sharding={s}", V100X8, 64)
        for c in ("none", "blocks")
        for s in ("none", "optimizer", "gradients", "parameters")
    }
    fitting = {k: v for k, v in every.items() if v is not None}
    assert (plan.checkpointing, plan.sharding) == min(fitting, key=lambda k: fitting[k])


def test_a_sharded_plan_is_not_traced_where_its_activations_alone_overflow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sharding divides the state (parameters, gradients, optimizer), never the activations:
    at the micro-steps where the unsharded plan's activations and batch, with the GPU's priors
    at their upper ends, already overflow the GPU (one micro-step: 16 samples, 44 GiB on a
    40 GB A100), its sharded siblings' memory is not asked for (a trace each, but ZeRO-1's);
    where they might fit (two micro-steps and more) it is, and the answer is the exhaustive
    search's (``test_a_plan_that_cannot_win_is_never_traced``)."""
    from advisor.prediction.forecast import plan_search

    asked: list[tuple[str, int]] = []
    real = plan_search.machine_memory

    def counted(*args, placement, **kw):  # type: ignore[no-untyped-def]
        asked.append((placement.plan.sharding, placement.plan.accumulation))
        return real(*args, placement=placement, **kw)

    monkeypatch.setattr(plan_search, "machine_memory", counted)
    row, plan = _best(gpu_machine("a100.8", "A100", 8, 32.0), batch=128)
    assert row.fits and plan is not None
    assert ("none", 1) in asked  # the unsharded plan's one micro-step: traced, too big
    sharded = [n for s, n in asked if s != "none"]
    assert sharded and min(sharded) > 1, asked


def test_the_bound_on_a_sharded_steps_upper_estimate_is_its_own_at_its_own_bytes() -> None:
    """``floor_high``: at a step's own traced bytes it is that step's upper estimate (what a fit
    is decided on) on one GPU, and no more on eight (NCCL's buffers left out); below them it
    is lower, never negative."""
    from advisor.prediction.forecast.plan_search import floor_high
    from advisor.prediction.memory.device import machine_memory
    from advisor.prediction.memory.model import PEAK_TERMS

    plan = TrainingPlan(precision="bf16", accumulation=2)
    for machine, batch in ((V100, 8), (V100X8, 64)):
        at = plan_search.place(machine, batch, plan)
        found = machine_memory(sized_probe(batch), machine, FakeCatalog(), batch, Store(),
                               placement=at)  # fmt: skip
        assert found is not None and found.memory.known
        m = found.memory
        traced = sum(t.value for t in m.terms if t.name in PEAK_TERMS.values())
        if machine is V100:
            assert floor_high(m, traced) == pytest.approx(m.high)
        else:
            assert floor_high(m, traced) < m.high  # NCCL's buffers
        assert 0 < floor_high(m, traced / 2) < floor_high(m, traced)


def test_a_row_that_fits_nowhere_traces_no_plan_that_cannot_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When nothing fits, a sharded plan whose floor already overflows the GPU is not traced
    either (only to lower a figure that does not fit anyway): the row keeps the least memory
    of the plans traced."""
    from advisor.probes.operators import plan_peak

    traced: list[str] = []

    def counted(workload, plan, *args, **kw):  # type: ignore[no-untyped-def]
        traced.append(str(kw.get("sharding")))
        return memory_fixtures.sized_lines(workload, plan, *args, **kw)

    monkeypatch.setattr(plan_peak, "peak_lines", counted)
    fixed = plan_fields("accumulation=1,checkpointing=none")  # 8 samples a GPU: 22 GiB
    row, _ = _best(V100X8, batch=64, fixed=fixed)
    assert row.fits is False and row.memory is not None
    assert traced == ["none"], traced  # the unsharded step alone
    assert row.memory.fit.need_bytes > row.memory.fit.have_bytes


def test_the_traced_mode_searches_only_the_plans_traced_already(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``mode="traced"`` (the report's several-machines hint): no plan's memory is traced for
    it beyond the plain plans, though the plans read from theirs are searched (DDP's
    micro-steps and ZeRO-1, ``ddp_lines``); once the search has traced the layouts, it finds
    the search's plan among them."""
    from advisor.probes.operators import plan_peak

    traced: list[str] = []

    def counted(workload, plan, *args, **kw):  # type: ignore[no-untyped-def]
        traced.append(f"{plan.checkpointing}/{kw.get('sharding')}/{plan.accumulation > 1}")
        return memory_fixtures.sized_lines(workload, plan, *args, **kw)

    monkeypatch.setattr(plan_peak, "peak_lines", counted)
    store = Store()

    def best(mode: str):  # type: ignore[no-untyped-def]
        return best_forecast(sized_probe(64), V100X8, FakeCatalog(), 64, 5, 1000, 100,
                             sweep_epochs=(), trace_store=store, mode=mode)  # fmt: skip

    row, plan = best("traced")  # 8 a GPU: the plain step does not fit a 16 GB V100
    assert traced == ["none/none/False"]  # read from it: micro-steps that fit
    assert row.fits and plan is not None and plan.accumulation > 1
    assert plan.sharding in ("none", "optimizer") and plan.checkpointing == "none"
    searched, searched_plan = best("search")
    assert searched.fits
    count = len(traced)
    row, plan = best("traced")
    assert len(traced) == count and row.fits and plan == searched_plan


@pytest.mark.slow  # about 50 s: 16 layouts of two 2-block models traced
@pytest.mark.parametrize("workload", [
    "hf:Qwen/Qwen2.5-0.5B,method=full,layers=2,vocab=512,seq_len=32",
    "hf:meta-llama/Llama-3.2-1B,method=lora,layers=2,vocab=512,seq_len=32",
])  # fmt: skip
def test_a_sharded_steps_peak_is_never_below_its_shard_floor(workload: str) -> None:
    """The premise of that pruning, on real traces (2-block models at their real widths, four
    ranks; full fine-tuning and LoRA, whose state ZeRO-1 and -2 hardly divide): at every
    micro-batch, each sharded plan's traced peak holds at least its unsharded plan's traced
    peak less what that level divides over the ranks (``plan_search.shard_floor``); and
    each plan's peak holds at least the plain step's parameters and optimizer state, less
    what its sharding divides (``plan_search.state_floor``)."""
    from advisor.probes.operators.plan_peak import lines_here

    from advisor.prediction.forecast.plan_search import shard_floor, state_floor
    from advisor.prediction.memory.model import PEAK_TERMS, MemoryTerm, StepMemory

    def memory(held: dict[str, int], micro: int) -> StepMemory:
        terms = tuple(MemoryTerm(PEAK_TERMS[k], v, v, v, "trace") for k, v in held.items())
        return StepMemory(micro, terms)

    plain: StepMemory | None = None
    for checkpointing in ("none", "blocks"):  # the plain plan first
        plan = TrainingPlan(precision="bf16", checkpointing=checkpointing)
        ddp = lines_here(workload, plan, {}, replicas=4, sharding="none")
        plain = plain or memory(ddp.at(32), 32)
        for sharding in ("optimizer", "gradients", "parameters"):
            sharded = lines_here(workload, TrainingPlan(precision="bf16", sharding=sharding,
                                                        checkpointing=checkpointing),
                                 {}, replicas=4, sharding=sharding)  # fmt: skip
            for micro in (1, 4, 32):
                floor = shard_floor(memory(ddp.at(micro), micro), sharding, 4)
                assert 0 < floor <= sum(sharded.at(micro).values()), (sharding, micro)
                held = state_floor(plain, sharding, 4)
                assert 0 < held <= sum(sharded.at(micro).values()), (sharding, micro)
                assert state_floor(plain, "none", 4) <= sum(ddp.at(micro).values())


def test_auto_weighs_bf16_alone_for_a_fine_tune_whose_base_computes_in_bf16(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A LoRA model's frozen base is held in bf16 and computes under bf16 autocast whatever
    the plan (``search_spaces.hf.data.CausalLM``): a tf32 plan would run the same products
    under another name, so on a GPU with bf16 it is neither weighed nor traced; on a GPU
    without bf16 (V100: fp16) both of its precisions still are."""
    lora = "hf:meta-llama/Llama-3.1-8B,method=lora"
    weighed: list[str] = []
    real = plan_search.forecast_machine

    def recording(*args, plan=None, **kw):  # type: ignore[no-untyped-def]
        if plan is not None:
            weighed.append(plan.precision)
        return real(*args, plan=plan, **kw)

    monkeypatch.setattr(plan_search, "forecast_machine", recording)

    def best(machine, workload):  # type: ignore[no-untyped-def]
        weighed.clear()
        return best_forecast(
            sized_probe(8, workload), machine, FakeCatalog(), 8, 5, 1000, 100,
            sweep_epochs=(), trace_store=Store(workload), precision="auto",
        )  # fmt: skip

    _, plan = best(A100, lora)
    assert plan is not None and plan.precision == "bf16" and set(weighed) == {"bf16"}
    best(A100, memory_fixtures.MODEL)  # a full fine-tune's wide plan multiplies in tf32
    assert set(weighed) == {"tf32", "bf16"}
    best(V100, lora)
    assert set(weighed) == {"fp32", "fp16"}


def test_a_search_with_no_fit_yet_stops_where_the_plans_left_are_beaten_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue #48: ``outpaced(training)`` (the screen's: is a run that long on this machine
    beaten on time and cost by a row that fits elsewhere?) is asked, while no plan fits, with
    the least training time of the plans left; where it says yes, none of them is traced and
    the row is the plain plan's, which does not fit. Where it never says yes the answer is
    the search's without it."""
    from advisor.probes.operators import plan_peak

    traced: list[str] = []

    def counted(workload, plan, *args, **kw):  # type: ignore[no-untyped-def]
        traced.append(f"{plan.checkpointing}/{kw.get('sharding')}/{plan.accumulation > 1}")
        return memory_fixtures.sized_lines(workload, plan, *args, **kw)

    monkeypatch.setattr(plan_peak, "peak_lines", counted)
    asked: list[float] = []

    def always(training):  # type: ignore[no-untyped-def]
        asked.append(training.value)
        return True

    row, plan = _best(V100X8, batch=64, outpaced=always)  # the plain step does not fit
    assert traced == ["none/none/False"] and row.fits is False and plan is None
    bound, _ = _best(V100X8, batch=64, mode="bound")  # the fastest plan, its memory untraced
    assert bound.training is not None and asked == [pytest.approx(bound.training.runtime.value)]

    asked.clear()
    never, never_plan = _best(V100X8, batch=64, outpaced=lambda t: asked.append(t.value) or False)
    alone, alone_plan = _best(V100X8, batch=64)
    assert never.fits and never_plan == alone_plan and _wall(never) == _wall(alone)
    assert asked and asked == sorted(asked)  # each the least time of the plans left


def test_no_plan_is_traced_whose_parameters_and_optimizer_state_alone_overflow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``state_floor``: the parameters and optimizer state are live through every plan's whole
    step, so where the plain step's (4 GiB and 12 GiB here), with the GPU's priors at their
    upper ends, overflow a 16 GB V100, no other plan of one GPU is traced; a 40 GB A100 holds
    them, and its plans are searched. On eight V100s sharding divides them: traced there."""
    import dataclasses

    from advisor.probes.operators import plan_peak
    from advisor.probes.operators.peak_lines import HOLDERS

    traced: list[str] = []
    at = HOLDERS.index("optimizer")

    def counted(workload, plan, *args, **kw):  # type: ignore[no-untyped-def]
        traced.append(f"{plan.checkpointing}/{kw.get('sharding')}/{plan.accumulation > 1}")
        lines = memory_fixtures.sized_lines(workload, plan, *args, **kw)
        state = 3 * memory_fixtures.REPLICA
        heavy = tuple(tuple(state if h == at else v for h, v in enumerate(point))
                      for point in lines.lines[0])  # fmt: skip
        return dataclasses.replace(lines, lines=(heavy,), state=state)

    monkeypatch.setattr(plan_peak, "peak_lines", counted)
    row, plan = _best(V100, batch=2, precision="fp16")  # the plain step traced, in fp16
    assert row.fits is False and traced == ["none/none/False"]
    assert plan is not None and plan.accumulation == 1 and plan.sharding == "none"
    assert row.memory is not None
    text = row.memory.text()
    assert text.startswith("does not fit under any plan: needs ") and "GiB or more" in text
    floor = row.memory.fit.floor_bytes
    assert 0 < floor < row.memory.fit.need_bytes  # the least any plan needs, below the plain's
    assert f"needs {floor / 2**30:.1f} GiB or more per GPU" in text
    assert f"the plain step needs {row.memory.fit.need_bytes / 2**30:.1f}" in text
    traced.clear()
    row, plan = _best(A100, batch=16, precision="fp16")
    assert len(traced) > 1  # its plans searched
    traced.clear()
    row, plan = _best(V100X8, batch=16, precision="fp16")  # ZeRO shards the 12 GiB
    assert any(t.split("/")[1] != "none" for t in traced), traced
