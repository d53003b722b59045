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
registered as float32 for the trace (``torch.library.register_autocast``), then unregistered.
Dropout takes CUDA's fused kernel (a one-byte mask). The optimizer runs its multi-tensor
(``foreach``) implementation, CUDA's default. PyTorch's ``MemTracker`` follows every storage
(weak references) and keeps the snapshot at the peak by holder.

What no trace sees (cuDNN's and the collectives' own buffers, the CUDA context, the caching
allocator's rounding) is added by the memory model as priors (``advisor.prediction.memory``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# CUDA autocast's float32 list that CPU autocast runs in the half type (PyTorch's "CUDA Ops
# that can autocast to float32", less those CPU autocast already keeps in float32).
CUDA_FLOAT32_OPS = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm",
    "group_norm", "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
    "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "softmax", "log_softmax", "cumprod", "cumsum", "prod", "sum", "norm",
)  # fmt: skip


HOLDERS = (
    "parameters", "gathered_parameters", "gradients", "optimizer", "activations",
    "backward_temporaries", "batch",
)  # fmt: skip
TRACED_BATCHES = (2, 4)  # the two micro-batches traced (shapes grow linearly between them)


class NotLinear(RuntimeError):
    """The step runs other ops at the two traced micro-batches (FSDP's collectives, say): its
    peak at another micro-batch must be traced there."""


@dataclass(frozen=True)
class PeakLines:
    """A step's live bytes under one plan as a function of the micro-batch ``b``: each moment
    of the step (after each op) holds ``at_low + (at_high - at_low) * (b - low) / (high - low)``
    bytes per holder, from the step traced at micro-batches ``low`` and ``high`` (tensor
    shapes grow linearly with the batch); only the moments that are the step's peak at some
    batch are kept (the upper envelope of those lines). ``state`` is the optimizer state's
    bytes (the rest of ``optimizer`` is its step's temporaries)."""

    low: int
    high: int
    lines: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]
    state: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    def at(self, micro_batch: int) -> dict[str, int]:
        """The live bytes by holder at the step's peak at ``micro_batch``."""
        f = (micro_batch - self.low) / (self.high - self.low)

        def value(line: tuple[tuple[int, ...], tuple[int, ...]]) -> list[float]:
            return [lo + (hi - lo) * f for lo, hi in zip(*line, strict=True)]

        best = max((value(line) for line in self.lines), key=sum)
        by = dict(zip(HOLDERS, (max(0, round(v)) for v in best), strict=True))
        opt = by.pop("optimizer")
        by["optimizer_state"] = min(opt, self.state)
        by["optimizer_temporaries"] = max(0, opt - self.state)
        return {k: v for k, v in by.items() if v}

    def to_dict(self) -> dict[str, Any]:
        return {
            "low": self.low, "high": self.high, "state": self.state, "notes": list(self.notes),
            "lines": [[list(lo), list(hi)] for lo, hi in self.lines],
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PeakLines:
        lines = tuple((tuple(map(int, lo)), tuple(map(int, hi))) for lo, hi in d["lines"])
        return cls(int(d["low"]), int(d["high"]), lines, int(d["state"]), tuple(d["notes"]))


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
    ``trace_plan_peak``) as the lines of its peak over the micro-batch."""
    low, high = TRACED_BATCHES
    kw = {"replicas": replicas, "sharding": sharding, "rules": rules}
    a = trace_plan_peak(workload, low, plan, hyperparameters, **kw)  # type: ignore[arg-type]
    b = trace_plan_peak(workload, high, plan, hyperparameters, **kw)  # type: ignore[arg-type]
    if len(a.timeline) != len(b.timeline):
        raise NotLinear(
            f"the step's ops differ between micro-batches {low} and {high} "
            f"({len(a.timeline)} and {len(b.timeline)}): its shapes are not linear in the batch"
        )
    return PeakLines(low, high, envelope(a.timeline, b.timeline, high - low), a.state, a.notes)


def peak_at(
    workload: str,
    micro_batch: int,
    plan: Any,
    hyperparameters: dict[str, Any] | None = None,
    **kw: Any,
) -> PeakLines:
    """The step traced at ``micro_batch`` alone, as lines that hold at that batch only."""
    a = trace_plan_peak(workload, micro_batch, plan, hyperparameters, **kw)
    return PeakLines(micro_batch, micro_batch + 1, envelope(a.timeline, a.timeline, 1),
                     a.state, (*a.notes, f"traced at micro-batch {micro_batch}"))  # fmt: skip


def envelope(
    low: tuple[tuple[int, ...], ...], high: tuple[tuple[int, ...], ...], span: int
) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """The moments whose total is the largest at some micro-batch (the upper envelope of the
    lines through each moment's totals at the two traced batches, ``span`` apart)."""
    best: dict[float, tuple[float, int]] = {}  # slope -> (total at the low batch, moment)
    for i, (lo, hi) in enumerate(zip(low, high, strict=True)):
        slope, base = (sum(hi) - sum(lo)) / span, float(sum(lo))
        if slope not in best or base > best[slope][0]:
            best[slope] = (base, i)
    hull: list[tuple[float, float, int]] = []  # (slope, base, moment), slopes rising
    for slope in sorted(best):
        base, i = best[slope]
        while hull and _above(hull[-1], (slope, base, i), hull[-2] if len(hull) > 1 else None):
            hull.pop()
        hull.append((slope, base, i))
    return tuple((low[i], high[i]) for _, _, i in hull)


def _above(last: tuple[float, float, int], new: tuple[float, float, int], before: Any) -> bool:
    """Whether ``last`` is never the highest once ``new`` (steeper) is added: ``new``
    overtakes ``before`` no later than ``last`` does (the upper hull of lines over every
    batch, so the lines of small batches are kept too)."""
    if before is None:
        return False
    x_new = (before[1] - new[1]) / (new[0] - before[0])
    x_last = (before[1] - last[1]) / (last[0] - before[0])
    return x_new <= x_last


@dataclass(frozen=True)
class PlanPeak:
    """One traced step: the live bytes by holder after each op (``timeline``, in ``HOLDERS``
    order), the optimizer state's bytes, and how it was traced."""

    timeline: tuple[tuple[int, ...], ...]
    state: int
    notes: tuple[str, ...] = field(default_factory=tuple)

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
    autocast lists a mixed-precision step follows, "cuda" (a GPU's) or "cpu" (the CPU's own:
    to check the trace against a real CPU step)."""
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
            tracker = _tracker(setup, (x, y), fsdp)
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
    return PlanPeak(tuple(tracker.timeline), _state_bytes(setup.optimizer), tuple(notes))


# The trackers' holder names (MemTracker's _MemRefType, FSDPMemTracker's _FSDPRefType) as ours.
HOLDER_OF = {
    "PARAM": "parameters", "BUFFER": "parameters", "SHARDED_PARAM": "parameters",
    "UNSHARDED_PARAM": "gathered_parameters", "ALL_GATHER": "gathered_parameters",
    "GRAD": "gradients", "SHARDED_GRAD": "gradients", "UNSHARDED_GRAD": "gradients",
    "REDUCE_SCATTER": "gradients", "OPT": "optimizer", "ACT": "activations",
    "TEMP": "backward_temporaries", "OTH": "batch", "INP": "batch",
}  # fmt: skip


def _timeline(base: type) -> type:
    """``base`` (PyTorch's ``MemTracker`` or ``FSDPMemTracker``) keeping, after every op, the
    live bytes by holder (``timeline``), in place of its per-module peaks (each op walked every
    tracked module: quadratic in the model's size, minutes for GPT-2 Large)."""

    class Tracker(base):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.timeline: list[tuple[int, ...]] = []

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


def _zero1_partition(optimizer: Any, replicas: int) -> None:
    """Keep in ``optimizer`` only the largest rank's parameters under
    ``ZeroRedundancyOptimizer``'s partition (largest first, each to the rank with the fewest
    elements so far, across the groups)."""
    sizes = [0] * replicas
    ranks: dict[int, int] = {}
    for group in optimizer.param_groups:
        for p in sorted(group["params"], key=lambda t: t.numel(), reverse=True):
            rank = sizes.index(min(sizes))
            ranks[id(p)] = rank
            sizes[rank] += p.numel()
    worst = sizes.index(max(sizes))
    for group in optimizer.param_groups:
        group["params"] = [p for p in group["params"] if ranks[id(p)] == worst]


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
def cuda_dropout() -> Iterator[None]:
    """Within: ``F.dropout`` (out of place, training) runs as ``native_dropout``, the fused
    kernel CUDA launches (a one-byte mask; the CPU takes a bernoulli path with a mask of the
    input's type). A patch of the function, not a mode, so that a checkpointed block's
    recomputation in backward takes the same path (a mode is not active there)."""
    import torch
    from advisor.probes.operators.torch_trace import fused_dropout

    functional = torch.nn.functional
    plain = functional.dropout

    def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
        fused = fused_dropout(False, input, p, training, inplace)
        return plain(input, p, training, inplace) if fused is None else fused

    functional.dropout = dropout
    try:
        yield
    finally:
        functional.dropout = plain


@contextlib.contextmanager
def cuda_autocast_lists() -> Iterator[None]:
    """Within: CPU autocast keeps in float32 the ops CUDA's autocast keeps there
    (``CUDA_FLOAT32_OPS``); unregistered after."""
    import torch

    lib = torch.library.Library("aten", "FRAGMENT")
    try:
        _register_float32(lib)
        yield
    finally:
        lib._destroy()  # the registrations go with the library fragment


def _register_float32(lib: Any) -> None:
    """Every overload of ``CUDA_FLOAT32_OPS`` that CPU autocast lets through (no AutocastCPU
    kernel of its own) cast to float32 under CPU autocast, as ``torch.library.register_autocast``
    does for custom ops (which cannot take an aten op with keyword arguments)."""
    import torch
    from torch.utils._pytree import tree_map

    key = torch._C.DispatchKey.AutocastCPU
    excluded = torch._C.DispatchKeySet(key)

    def up(t: Any) -> Any:
        wide = isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64
        return t.to(torch.float32) if wide else t

    for name in CUDA_FLOAT32_OPS:
        packet = getattr(torch.ops.aten, name, None)
        for overload in packet.overloads() if packet is not None else ():
            op = getattr(packet, overload)
            try:
                if op.has_kernel_for_dispatch_key(key):
                    continue  # CPU autocast's own rule (its float32 list, say)
            except RuntimeError:  # an overload the dispatcher does not hold (TorchScript's)
                continue

            def kernel(_keys: Any, *args: Any, _op: Any = op, **kwargs: Any) -> Any:
                with torch._C._ExcludeDispatchKeyGuard(excluded):
                    return _op(*tree_map(up, args), **tree_map(up, kwargs))

            lib.impl(op._schema.name.split("::")[1] + ("" if overload == "default" else f".{overload}"),
                     kernel, "AutocastCPU", with_keyset=True)  # fmt: skip


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


def _tracker(setup: Any, batch: tuple[Any, Any], fsdp: bool) -> Any:
    if fsdp:
        from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

        tracker = _timeline(FSDPMemTracker)(setup.model, setup.optimizer)
        tracker.track_inputs(batch)
        return tracker
    from advisor.probes.operators.peak_memory import tracker_class

    tracker = _timeline(tracker_class())()
    tracker.track_external(setup.model, setup.optimizer, *batch)
    return tracker


def _state_bytes(optimizer: Any) -> int:
    from advisor.probes.operators.optimizer import state_bytes

    return int(state_bytes(getattr(optimizer, "optim", optimizer)))
