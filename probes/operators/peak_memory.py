"""The peak of live tensor bytes during a traced training step, by what holds them.

PyTorch's own tracker does the work: ``torch.distributed._tools.mem_tracker.MemTracker``, a
``TorchDispatchMode`` that follows every tensor storage an op creates (weak references, so a
storage freed by autograd or Python leaves the count when it dies) and keeps the snapshot of
the moment the total was highest, by category: parameters, buffers, gradients, activations
(created in the forward pass), temporaries of the backward pass, the optimizer's tensors
(its state and the temporaries of its step) and the batch. It works on meta tensors (no memory
is allocated: a storage's size is its shape's bytes) as on real ones, so the peak includes the
transient working set (attention scores and their softmax, the loss on large logits, the
gradient of the largest layer during backward, the multi-tensor optimizer's temporaries).

Caveats: only storages made through the dispatcher are seen (a kernel's private workspace,
cuDNN's, is not; the memory model adds it as a prior); sizes are exact bytes (CUDA's caching
allocator rounds each block up to 512 bytes, a negligible difference for a model's tensors).
"""

from __future__ import annotations

from typing import Any

# Keys of ``OperatorTrace.peak_memory`` (the snapshot at the peak; they sum to the peak).
PEAK_KEYS = (
    "parameters",
    "gradients",
    "optimizer_state",
    "activations",
    "backward_temporaries",
    "optimizer_temporaries",
    "batch",
)


class PeakMemory:
    """Context manager around one training step: :attr:`bytes` is the snapshot at the peak
    (``PEAK_KEYS``), empty when the tracker could not follow the step (:attr:`error`)."""

    def __init__(self, model: Any, optimizer: Any, batch: Any, device: str) -> None:
        self._model, self._optimizer, self._batch = model, optimizer, batch
        self._device = device  # "meta" or "cpu": the device whose storages are counted
        self._tracker: Any = None
        self.bytes: dict[str, int] = {}
        self.error = ""

    def __enter__(self) -> PeakMemory:
        try:
            tracker = tracker_for()
            tracker.track_external(self._model, self._optimizer, *self._batch)
            tracker.__enter__()
            self._tracker = tracker
        except Exception as exc:  # no tracker in this torch: the peak stays unknown
            self.error = _reason(exc)
        return self

    def __exit__(self, *exc: Any) -> None:
        tracker, self._tracker = self._tracker, None
        if tracker is None:
            return
        tracker.__exit__(*exc)
        if exc[0] is None:
            self.bytes = split_peak(tracker.get_tracker_snapshot("peak"), self._device, self._state)

    @property
    def _state(self) -> int:
        from advisor.probes.operators.optimizer import state_bytes

        return int(state_bytes(self._optimizer))


def split_peak(
    snapshot: dict[Any, dict[Any, int]], device: str, state_bytes: int
) -> dict[str, int]:
    """``MemTracker``'s peak snapshot of ``device`` as ``PEAK_KEYS``: the optimizer's tensors
    split into its state (at most ``state_bytes``) and its step's temporaries."""
    snap = next((s for d, s in snapshot.items() if getattr(d, "type", str(d)) == device), None)
    if not snap:
        return {}
    by = {getattr(k, "name", str(k)): int(v) for k, v in snap.items()}
    opt = by.get("OPT", 0)
    out = {
        "parameters": by.get("PARAM", 0) + by.get("BUFFER", 0),
        "gradients": by.get("GRAD", 0),
        "optimizer_state": min(opt, state_bytes),
        "activations": by.get("ACT", 0),
        "backward_temporaries": by.get("TEMP", 0),
        "optimizer_temporaries": max(0, opt - state_bytes),
        "batch": by.get("OTH", 0),
    }
    return out


def tracker_for() -> Any:
    """A ``MemTracker`` that also follows models with frozen parameters."""
    return tracker_class()()


def tracker_class() -> Any:
    """``MemTracker`` made to follow models with frozen parameters too (it would register a
    gradient hook on each parameter, which fails on one that needs no gradient), keeping the
    step's global peak only: its per-module peaks (which nothing here reads) walked every
    tracked module at every op, quadratic in the model's size (issue #46: 69 of a 77 s trace
    of GPT-2 Large)."""
    from copy import deepcopy

    from torch.distributed._tools.mem_tracker import MemTracker

    class _NoHook:
        def remove(self) -> None:
            pass

    class Tracker(MemTracker):
        def _track_module_params_and_buffers(
            self, module: Any, install_grad_hooks: bool = True
        ) -> tuple[int, int]:
            for p in module.parameters():
                if not p.requires_grad and p not in self._param_to_grad_hook_handles:
                    self._param_to_grad_hook_handles[p] = (_NoHook(), _NoHook())
            return super()._track_module_params_and_buffers(module, install_grad_hooks)

        def _update_peak_stats(self, peak_state: Any) -> None:
            for dev, snap in self._curr_mem_snap.items():
                total = snap.get("Total", 0)
                if self._peak_mem.get(dev, 0) < total:
                    self._peak_mem[dev] = total
                    self._peak_mem_snap[dev] = deepcopy(snap)

    return Tracker


def _reason(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
