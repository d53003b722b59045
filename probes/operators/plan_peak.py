"""The peak memory of one training step under a training plan, traced by running the step that
``python -m advisor.train`` runs (issue #45: a plan's memory is the memory of the step that runs).

The workload is built on the meta device and its tensors become fake tensors on the CPU
(``FakeTensorMode``: shapes and dtypes, no memory, no arithmetic; unlike meta tensors they
carry a real device, so ``torch.autocast`` applies). Then, as ``advisor.train`` does:

- ``checkpointing=blocks``: the blocks wrapped by ``advisor.probes.plan_step.checkpoint_blocks``,
  so the recomputation in backward is the real one (its peak, not a factor);
- the step is ``advisor.probes.plan_step.make_step`` itself: autocast over forward and loss,
  the micro-batches with their gradients added into the kept ones (two micro-steps stand for
  any accumulation of two or more: every micro-step after the first is the same), one
  optimizer step;
- on ``replicas`` > 1 GPUs without sharding or with ZeRO-1, DDP's gradient buckets: with
  ``gradient_as_bucket_view`` the gradients are the buckets, held through the whole step
  (forward included); ZeRO-1 (``ZeroRedundancyOptimizer``): the optimizer's state and step
  over the largest of its greedy partitions of the parameters (its own rule: largest first,
  each to the rank holding the fewest elements), the worst GPU's;
- ZeRO-2/3: the model sharded by ``advisor.probes.sharding``'s FSDP2 setup over a fake process
  group of ``replicas`` ranks, tracked by PyTorch's ``FSDPMemTracker`` (sharded and gathered
  parameters, all-gather and reduce-scatter buffers).

Autocast follows CUDA's rules: the CPU's autocast runs the matrix products and convolutions in
the half type as CUDA's does, and the ops CUDA's autocast keeps in float32 (layer norm,
softmax, log-softmax, the losses, ...; PyTorch's "CUDA Ops that can autocast to float32") are
registered as float32 for the trace (``cuda_paths.cuda_autocast_lists``), then unregistered.
Dropout takes CUDA's fused kernel (a one-byte mask). The optimizer runs its multi-tensor
(``foreach``) implementation, CUDA's default. Convolutions write their outputs in the format
the device's library writes them, and the kernels' own copies and buffers that a meta kernel
lacks (max pooling's backward, ATen's CPU column buffer) are held while they run
(``kernel_memory``; ``rules`` names the device). PyTorch's ``MemTracker`` follows every storage
(weak references) and keeps the snapshot at the peak by holder.

What no trace sees (cuDNN's and the collectives' own buffers, the CUDA context, the caching
allocator's rounding) is added by the memory model as priors (``advisor.prediction.memory.model``).
FSDP's step is traced on two rank counts of a layout and carried to the others
(``advisor.probes.operators.replica_carry``, through ``step_peak``).

Size: one concept, the step under a plan as traced: its set-up on fake tensors (FSDP's fake
process group, ZeRO-1's partition, autocast's lists), the trace, and the peak lines drawn from
it; split, each part would only be called from the others.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from advisor.probes.operators.cuda_paths import cuda_autocast_lists, cuda_dropout
from advisor.probes.operators.kernel_memory import KERNEL_OPS, as_on_device, held_beside
from advisor.probes.operators.peak_lines import (
    HOLDERS,
    TRACED_BATCHES,
    NotLinear,
    PeakLines,
    Sizes,
    envelope,
)


def peak_lines(
    workload: str,
    plan: Any,
    hyperparameters: dict[str, Any] | None = None,
    *,
    replicas: int = 1,
    sharding: str = "none",
    rules: str = "cuda",
) -> PeakLines:
    """The step of ``workload`` under ``plan`` traced at ``TRACED_BATCHES`` micro-batches (see
    ``trace_plan_peak``) as the lines of its peak over the micro-batch. A user's
    ``module:function`` is traced in the isolated worker (issue #50), a built-in here; a deep
    model's two shallow traces (an ``hf:`` model's, a declared builder's) run side by side in
    two workers where this process may use two CPUs (``isolated.call_isolated_each``)."""
    kw: dict[str, Any] = {"replicas": replicas, "sharding": sharding, "rules": rules}
    from advisor.probes.isolated import slots
    from advisor.probes.operators import layer_scaling as depths
    from advisor.search_spaces.workloads import ModelRef

    if workload.startswith("hf:") and slots() > 1:  # its shallow traces side by side
        what = f"--model {workload} (its step traced under the plan)"
        scaled = depths.scaled_lines(
            workload,
            lambda w: side_by_side(w, plan, hyperparameters, kw, what),
            lambda ws: crosswise([(w, hyperparameters) for w in ws], plan, kw, what),
        )
        if scaled is not None:
            return scaled
        return lines_here(workload, plan, hyperparameters, carry=False, **kw)  # traced whole
    if ModelRef(workload).is_user:  # a declared depth: its two shallow traces side by side
        from advisor.probes.operators.workload import user_declared_depth

        depth = user_declared_depth(workload, hyperparameters)
        if depth is not None:
            what = f"--model {workload} (its step traced under the plan)"
            small = crosswise(
                [(workload, hps) for hps in depths.shallow_hyperparameters(hyperparameters)],
                plan, kw, what,
            )  # fmt: skip
            carried = depths.carried_deeper(
                small, depth, depths.DECLARED_SHALLOW, depths.DECLARED_DEEPER,
                lambda n: side_by_side(workload, plan, {**(hyperparameters or {}), "layers": n},
                                       kw, what),
            )  # fmt: skip
            if carried is not None:
                return carried
            hyperparameters = {**(hyperparameters or {}), "layers": depth}  # traced whole
    return _at_arms_length(workload, "traced under the plan", lines_here, workload, plan,
                           hyperparameters, **kw)  # fmt: skip


def lines_here(
    workload: str,
    plan: Any,
    hyperparameters: dict[str, Any] | None = None,
    *,
    replicas: int = 1,
    sharding: str = "none",
    rules: str = "cuda",
    carry: bool = True,
) -> PeakLines:
    """:func:`peak_lines` in this process (the isolated worker calls this); a deep model's
    from two shallow traces (``layer_scaling``: an ``hf:`` model, issue #48, or a builder that
    declares its ``blocks``, issue #46) unless ``carry`` is False (tried already: traced
    whole)."""
    from advisor.probes.operators.layer_scaling import scaled_declared_lines, scaled_lines

    def at(w: str, hps: dict[str, Any] | None) -> PeakLines:
        return lines_here(w, plan, hps, replicas=replicas, sharding=sharding, rules=rules)

    scaled = (
        None
        if not carry
        else scaled_lines(workload, lambda w: at(w, hyperparameters))
        if workload.startswith("hf:")
        else scaled_declared_lines(workload, hyperparameters, lambda hps: at(workload, hps))
    )
    if scaled is not None:
        return scaled
    a, b = (
        step_peak(workload, m, plan, hyperparameters, replicas=replicas, sharding=sharding,
                  rules=rules)
        for m in TRACED_BATCHES
    )  # fmt: skip
    return lines_of(a, b)


def lines_of(a: PlanPeak, b: PlanPeak) -> PeakLines:
    """The peak lines through the step traced at the two ``TRACED_BATCHES`` (``a``, ``b``)."""
    low, high = TRACED_BATCHES
    if len(a.timeline) != len(b.timeline):
        raise NotLinear(
            f"the step's ops differ between micro-batches {low} and {high} "
            f"({len(a.timeline)} and {len(b.timeline)}): its shapes are not linear in the batch"
        )
    return PeakLines(low, high, envelope(a.timeline, b.timeline, high - low, 1 - low), a.state,
                     a.notes, a.sizes)  # fmt: skip


def crosswise(
    models: list[tuple[str, dict[str, Any] | None]], plan: Any, kw: dict[str, Any], what: str
) -> list[PeakLines]:
    """The peak lines of two shallow models (``(workload, hyperparameters)``: a deep model at
    its two traced depths), their four steps (two depths x ``TRACED_BATCHES``) traced in the
    isolated workers crosswise: one worker the shallower model's smaller micro-batch and the
    deeper one's larger, the other the rest. A step's trace takes a time that grows with its
    blocks (its ops), hardly with its batch, so both workers get the same work, where a worker
    per depth left the shallower one idle over a quarter of the time (GPT-2 Large: 36 s
    against 50 s of traces). The same worker traces the same (depth, micro-batch) every time, so the FSDP
    traces a worker keeps by rank count (``replica_carry``) stay whole."""
    from advisor.probes.isolated import call_isolated_each

    low, high = TRACED_BATCHES
    order = [(0, low), (1, low), (1, high), (0, high)]  # the i-th call goes to worker i % 2
    traced = call_isolated_each(
        [(step_peak, (models[i][0], m, plan, models[i][1]), kw) for i, m in order], what=what
    )
    got = dict(zip(order, traced, strict=True))
    return [lines_of(got[(i, low)], got[(i, high)]) for i in range(len(models))]


def side_by_side(
    workload: str, plan: Any, hyperparameters: dict[str, Any] | None, kw: dict[str, Any],
    what: str,
) -> PeakLines:  # fmt: skip
    """The peak lines of ``workload`` traced whole (a wider depth of a deep model, whose
    shallow pair did not correspond), its two ``TRACED_BATCHES`` in the two workers side by
    side. Each worker traces one micro-batch, as in ``crosswise``: the smaller in the first."""
    from advisor.probes.isolated import call_isolated_each

    a, b = call_isolated_each(
        [(step_peak, (workload, m, plan, hyperparameters), kw) for m in TRACED_BATCHES], what=what
    )
    return lines_of(a, b)


def peak_at(
    workload: str,
    micro_batch: int,
    plan: Any,
    hyperparameters: dict[str, Any] | None = None,
    **kw: Any,
) -> PeakLines:
    """The step traced at ``micro_batch`` alone, as lines that hold at that batch only (a
    user's model in the isolated worker)."""
    return _at_arms_length(workload, f"traced under the plan at micro-batch {micro_batch}",
                           at_here, workload, micro_batch, plan, hyperparameters, **kw)  # fmt: skip


def at_here(
    workload: str,
    micro_batch: int,
    plan: Any,
    hyperparameters: dict[str, Any] | None = None,
    **kw: Any,
) -> PeakLines:
    """:func:`peak_at` in this process."""
    a = step_peak(workload, micro_batch, plan, hyperparameters, **kw)
    return PeakLines(micro_batch, micro_batch + 1, envelope(a.timeline, a.timeline, 1),
                     a.state, (*a.notes, f"traced at micro-batch {micro_batch}"),
                     a.sizes)  # fmt: skip


def step_peak(
    workload: str,
    micro_batch: int,
    plan: Any,
    hyperparameters: dict[str, Any] | None = None,
    *,
    replicas: int = 1,
    sharding: str = "none",
    rules: str = "cuda",
) -> PlanPeak:
    """``trace_plan_peak``; FSDP's step on several ranks through ``replica_carry.RANK_TRACES``
    (traced on two rank counts of its layout, carried to the others)."""
    import json

    from advisor.probes.operators.replica_carry import RANK_TRACES, carries

    def on(ranks: int) -> PlanPeak:
        return trace_plan_peak(workload, micro_batch, plan, hyperparameters, replicas=ranks,
                               sharding=sharding, rules=rules)  # fmt: skip

    if not carries(replicas, sharding):
        return on(replicas)
    # what the traced step is made of but its ranks: two micro-steps stand for any two or
    # more (``trace_plan_peak``), so accumulation 2, 4 and 8 are one family
    traced = [plan.precision, min(plan.accumulation, 2), plan.checkpointing]
    family = json.dumps([workload, micro_batch, traced, hyperparameters, sharding, rules],
                        sort_keys=True, default=str)  # fmt: skip
    found: PlanPeak = RANK_TRACES.step(family, replicas, on)
    return found


def _at_arms_length(workload: str, doing: str, fn: Any, *args: Any, **kw: Any) -> PeakLines:
    """``fn(*args, **kw)``: in the isolated worker for a user's ``module:function`` (its
    builder and step run there, issue #50), here for a built-in workload (our own code)."""
    from advisor.search_spaces.workloads import ModelRef

    if not ModelRef(workload).is_user:
        return fn(*args, **kw)
    from advisor.probes.isolated import call_isolated

    found: PeakLines = call_isolated(fn, *args, what=f"--model {workload} (its step {doing})",
                                     **kw)  # fmt: skip
    return found


@dataclass(frozen=True)
class PlanPeak:
    """One traced step: the live bytes by holder after each op (``timeline``, in ``HOLDERS``
    order), the optimizer state's bytes, how it was traced, and the optimizer's tensors
    (``Sizes``, all of them: before any ZeRO-1 partition)."""

    timeline: tuple[tuple[int, ...], ...]
    state: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    sizes: Sizes = ()

    @property
    def peak(self) -> dict[str, int]:
        """The live bytes by holder at the step's peak."""
        return PeakLines(1, 2, tuple((t, t) for t in self.timeline), self.state).at(1)


def trace_plan_peak(
    workload: str,
    micro_batch: int,
    plan: Any,
    hyperparameters: dict[str, Any] | None = None,
    *,
    replicas: int = 1,
    sharding: str = "none",
    rules: str = "cuda",
    seed: int = 0,
) -> PlanPeak:
    """One optimizer step of ``workload`` under ``plan`` (precision, accumulation,
    checkpointing) at ``micro_batch`` samples per micro-step on one of ``replicas`` GPUs with
    ``sharding`` ("none", "optimizer", "gradients", "parameters"), traced. ``rules``: whose
    autocast lists and kernels (``kernel_memory``) the step follows, "cuda" (a GPU's) or "cpu"
    (this CPU's own: to check the trace against a real CPU step)."""
    import torch
    from advisor.probes.operators.torch_workload import meta_batch
    from advisor.probes.plan_step import checkpoint_blocks, make_step
    from advisor.probes.sharding import uses_fsdp
    from advisor.probes.torch_loop import build_setup, split_batch
    from torch._subclasses.fake_tensor import FakeTensorMode

    if micro_batch <= 0:
        raise ValueError(f"micro_batch must be > 0, but got {micro_batch}")
    if rules not in ("cuda", "cpu"):
        raise ValueError(f"rules must be 'cuda' or 'cpu', but got {rules!r}")
    steps = min(plan.accumulation, 2)
    batch = micro_batch * steps
    notes = ["the step advisor.train runs under the plan, traced on fake tensors"]
    if steps != plan.accumulation:  # the step splits its batch into the plan's micro-steps
        notes.append(f"{plan.accumulation} micro-steps: two traced (the rest repeat the second)")
        plan = dataclasses.replace(plan, accumulation=steps)
    small = min(batch, 8)
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setup, _, _ = build_setup(workload, batch, small, small, seed, dict(hyperparameters or {}))
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    _to_fake(setup, mode)
    x, y = (_fake(t, mode) for t in split_batch(meta_batch(setup.train_loader, batch)))
    if plan.checkpointing == "blocks":
        checkpoint_blocks(setup.model)
    fsdp = replicas > 1 and uses_fsdp(sharding)
    keep = replicas > 1 and not fsdp  # DDP's buckets are the gradients
    setup.model.train()
    half = plan.precision in ("bf16", "fp16") and rules == "cuda"
    sizes = optimizer_sizes(setup.optimizer)
    with (
        warnings.catch_warnings(),  # FSDP2's and autocast's advice to users, not to a trace
        _fake_group(replicas if fsdp else 1) as mesh,
        mode,
        _cuda_paths(half),
    ):
        warnings.simplefilter("ignore")
        if fsdp:
            setup = _fsdp(setup, sharding, mesh)
        elif replicas > 1 and sharding == "optimizer":
            _zero1_partition(setup.optimizer, replicas)
        with _foreach(setup.optimizer):
            _warm_up(setup, keep)
            tracker = _tracker(setup, (x, y), fsdp, rules)
            step = make_step(plan, "cpu", traced=True, keep_gradients=keep,
                             between=tracker.reset_mod_stats)  # fmt: skip
            with tracker:
                step(setup, (x, y), "cpu")
    if keep:
        notes.append("DDP: the gradients are its all-reduce buckets, held through the step")
    if fsdp:
        notes.append(f"FSDP2 over {replicas} ranks, tracked by FSDPMemTracker")
    elif replicas > 1 and sharding == "optimizer":
        notes.append(f"ZeRO-1: the largest of {replicas} optimizer partitions")
    if half:
        notes.append("CUDA's autocast float32 list applied")
    return PlanPeak(tuple(tracker.timeline), _state_bytes(setup.optimizer), tuple(notes), sizes)


# The trackers' holder names (MemTracker's _MemRefType, FSDPMemTracker's _FSDPRefType) as ours.
HOLDER_OF = {
    "PARAM": "parameters", "BUFFER": "parameters", "SHARDED_PARAM": "parameters",
    "UNSHARDED_PARAM": "gathered_parameters", "ALL_GATHER": "gathered_parameters",
    "GRAD": "gradients", "SHARDED_GRAD": "gradients", "UNSHARDED_GRAD": "gradients",
    "REDUCE_SCATTER": "gradients", "OPT": "optimizer", "ACT": "activations",
    "TEMP": "backward_temporaries", "OTH": "batch", "INP": "batch",
}  # fmt: skip


def _timeline(base: type, rules: str) -> type:
    """``base`` (PyTorch's ``MemTracker`` or ``FSDPMemTracker``) keeping, after every op, the
    live bytes by holder (``timeline``), in place of its per-module peaks (each op walked every
    tracked module: quadratic in the model's size, minutes for GPT-2 Large); the ops of
    ``KERNEL_OPS`` as ``rules``' device runs them (``kernel_memory``)."""

    class Tracker(base):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.timeline: list[tuple[int, ...]] = []

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            if getattr(func, "_opname", None) not in KERNEL_OPS:
                return super().__torch_dispatch__(func, types, args, kwargs)
            out = super().__torch_dispatch__(as_on_device(func, rules), types, args, kwargs)
            held = [super(Tracker, self).__torch_dispatch__(op, types, a, k)
                    for op, a, k in held_beside(rules, func, args, out)]  # fmt: skip
            del held  # freed as the kernel returns
            return out

        def _update_peak_stats(self, peak_state: Any) -> None:
            by = dict.fromkeys(HOLDERS, 0)
            for snap in self._curr_mem_snap.values():
                for ref, value in snap.items():
                    holder = HOLDER_OF.get(getattr(ref, "name", ""))
                    if holder is not None:
                        by[holder] += int(value)
            self.timeline.append(tuple(by[h] for h in HOLDERS))

    return Tracker


def _fake(t: Any, mode: Any) -> Any:
    """A meta tensor as a fake CPU tensor of the same shape and dtype."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    if not isinstance(t, torch.Tensor):
        return t
    meta = t if t.is_meta else torch.empty_like(t, device="meta")
    return FakeTensor(mode, meta, torch.device("cpu"))


def _to_fake(setup: Any, mode: Any) -> None:
    """The model's parameters and buffers as fake CPU tensors (tied parameters stay tied), and
    the optimizer's parameter groups pointed at them."""
    import torch

    new: dict[int, Any] = {}
    for module in setup.model.modules():
        for name, p in list(module._parameters.items()):
            if p is None:
                continue
            if id(p) not in new:
                new[id(p)] = torch.nn.Parameter(_fake(p.detach(), mode), p.requires_grad)
            module._parameters[name] = new[id(p)]
        for name, b in list(module._buffers.items()):
            if b is not None:
                module._buffers[name] = _fake(b, mode)
    for group in setup.optimizer.param_groups:
        group["params"] = [new[id(p)] for p in group["params"]]
    setup.optimizer.state.clear()


def optimizer_sizes(optimizer: Any) -> Sizes:
    """The optimizer's tensors by parameter group and size (``Sizes``)."""
    from collections import Counter

    counts = Counter(
        (g, p.numel()) for g, group in enumerate(optimizer.param_groups) for p in group["params"]
    )
    return tuple(sorted((g, n, c) for (g, n), c in counts.items()))


def _zero1_partition(optimizer: Any, replicas: int) -> None:
    """Keep in ``optimizer`` only the largest rank's parameters under
    ``ZeroRedundancyOptimizer``'s partition (``ddp_lines.assign``)."""
    from advisor.probes.operators.ddp_lines import assign

    groups = optimizer.param_groups
    ranked = assign([[p.numel() for p in g["params"]] for g in groups], replicas)
    totals = [0] * replicas
    for group, ranks in zip(groups, ranked, strict=True):
        for p, rank in zip(group["params"], ranks, strict=True):
            totals[rank] += p.numel()
    worst = totals.index(max(totals))
    for group, ranks in zip(groups, ranked, strict=True):
        group["params"] = [p for p, r in zip(group["params"], ranks, strict=True) if r == worst]


def _fsdp(setup: Any, sharding: str, mesh: Any) -> Any:
    from advisor.probes.plan_step import blocks_of
    from advisor.probes.sharding import fsdp

    return fsdp(setup, sharding, blocks_of(setup.model), mesh=mesh)


@contextlib.contextmanager
def _fake_group(ranks: int) -> Iterator[Any]:
    """A fake process group of ``ranks`` (collectives do nothing) and its CPU mesh; nothing
    for one rank."""
    if ranks <= 1:
        yield None
        return
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise RuntimeError("a process group is already initialized in this process")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=ranks)
    try:
        yield init_device_mesh("cpu", (ranks,))
    finally:
        dist.destroy_process_group()


@contextlib.contextmanager
def _cuda_paths(autocast_float32: bool) -> Iterator[None]:
    """Within: dropout through CUDA's fused kernel and, ``autocast_float32``, CUDA's autocast
    float32 list on the CPU."""
    with cuda_dropout(), cuda_autocast_lists() if autocast_float32 else contextlib.nullcontext():
        yield


@contextlib.contextmanager
def _foreach(optimizer: Any) -> Iterator[None]:
    from advisor.probes.operators.optimizer import cuda_default_foreach

    inner = getattr(optimizer, "optim", optimizer)
    with cuda_default_foreach(inner):
        yield


def _warm_up(setup: Any, keep: bool) -> None:
    """The optimizer's state created by one step on zero gradients (every step after the first
    finds it); the gradients then freed, or kept (DDP's buckets)."""
    import torch

    params = [p for p in setup.model.parameters() if p.requires_grad]
    with torch.no_grad():
        for p in params:
            p.grad = torch.zeros_like(p)
    with contextlib.suppress(Exception):  # an optimizer that needs a closure: first-step state
        setup.optimizer.step()
    setup.optimizer.zero_grad(set_to_none=not keep)


def _tracker(setup: Any, batch: tuple[Any, Any], fsdp: bool, rules: str) -> Any:
    if fsdp:
        from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

        tracker = _timeline(FSDPMemTracker, rules)(setup.model, setup.optimizer)
        tracker.track_inputs(batch)
        return tracker
    from advisor.probes.operators.peak_memory import tracker_class

    tracker = _timeline(tracker_class(), rules)()
    tracker.track_external(setup.model, setup.optimizer, *batch)
    return tracker


def _state_bytes(optimizer: Any) -> int:
    from advisor.probes.operators.optimizer import state_bytes

    return int(state_bytes(getattr(optimizer, "optim", optimizer)))
