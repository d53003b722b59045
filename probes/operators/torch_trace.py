"""Trace one PyTorch training step (forward, loss, backward, optimizer) into an
:class:`~advisor.probes.operators.types.OperatorTrace`, with torch's ``TorchDispatchMode``.

The dispatch mode sees every aten op below autograd, so the backward pass appears as the ops
autograd runs (two ``mm`` per ``addmm``, ``convolution_backward``, ``gelu_backward``...). Each
op becomes the records of the kernels a CUDA run would launch (:mod:`.aten_ops`,
:mod:`.optimizer`); identical records are merged with a ``count``. Where the CPU or meta
device takes another path than CUDA the step is steered to CUDA's: dropout through the fused
``native_dropout`` and attention through its fused kernel (:class:`_CudaPaths`), the
optimizer through its multi-tensor implementation, and the optimizer state is created by an
untraced step first, so the traced one is a steady-state step. Works on meta tensors (no
memory, no compute) and real ones.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from advisor.probes.operators.aten_ops import records
from advisor.probes.operators.cuda_attention import fused_attention
from advisor.probes.operators.kernel_memory import conv_output
from advisor.probes.operators.optimizer import (
    cuda_default_foreach,
    host_step_tensors,
    is_multi_tensor,
    multi_tensor_records,
    state_bytes,
)
from advisor.probes.operators.peak_memory import PeakMemory
from advisor.probes.operators.recurrent import recurrent_records
from advisor.probes.operators.tensors import tensors_of
from advisor.probes.operators.types import Operator, OperatorTrace


def trace_step(
    model: Any,
    loss_fn: Callable[[Any, Any], Any],
    optimizer: Any,
    inputs: Any,
    targets: Any,
    *,
    workload: str,
    batch_size: int,
    notes: tuple[str, ...] = (),
) -> OperatorTrace:
    """The operators of one training step of ``model`` on ``(inputs, targets)``.

    On meta tensors (``inputs`` and the parameters on ``torch.device("meta")``) nothing is
    computed and the trace has ``executed=False``; on real tensors the step really runs (and
    updates the parameters). ``memory_bytes`` gets the parameters, gradients, optimizer state
    and the activations autograd saves for the backward pass.
    """

    meta = any(t.is_meta for t in (*model.parameters(), *tensors_of((inputs, targets))))
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()
    step_notes = list(notes)
    with cuda_default_foreach(optimizer) as how:
        step_notes.append(how)
        if not _warm_up(optimizer, params):
            step_notes.append("optimizer state created by the traced step (first-step kernels)")
        host = host_step_tensors(optimizer)

        def on_device(t: Any) -> bool:
            return bool(t.is_meta) if meta else id(t) not in host

        recorder, saved, peak = _traced_step(
            model, loss_fn, optimizer, inputs, targets, params, on_device, meta, True
        )
        if peak.error:  # the tracker could not follow this step: trace it without
            step_notes.append(f"peak memory not tracked ({peak.error})")
            recorder, saved, peak = _traced_step(
                model, loss_fn, optimizer, inputs, targets, params, on_device, meta, False
            )
    memory = {
        "parameters": sum(_nbytes(p) for p in model.parameters()),
        "gradients": sum(_nbytes(p) for p in params),
        "optimizer_state": state_bytes(optimizer),
        "activations": saved.bytes,
    }
    step_notes.append(
        "traced on the meta device: shapes only, not run" if meta else "traced by running it"
    )
    return OperatorTrace(
        workload=workload,
        framework="torch",
        batch_size=batch_size,
        operators=merge(recorder.operators),
        executed=not meta,
        parameters=sum(p.numel() for p in params),
        notes=tuple(step_notes),
        memory_bytes=memory,
        peak_memory=peak.bytes,
    )


def _traced_step(
    model: Any,
    loss_fn: Callable[[Any, Any], Any],
    optimizer: Any,
    inputs: Any,
    targets: Any,
    params: list[Any],
    on_device: Callable[[Any], bool],
    meta: bool,
    track_peak: bool,
) -> tuple[_Recorder, _SavedTensors, PeakMemory]:
    """One recorded step; with ``track_peak`` its peak of live bytes too (a tracker that
    fails leaves ``error`` set and the step is to be traced again without it)."""
    import torch

    recorder = _Recorder(on_device)
    saved = _SavedTensors(params)
    peak = PeakMemory(model, optimizer, (inputs, targets), "meta" if meta else "cpu")
    optimizer.zero_grad(set_to_none=True)
    try:
        with (
            _CudaPaths(recorder),
            peak if track_peak else nullcontext(),
            recorder,
            torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack),
        ):
            loss = loss_fn(model(inputs), targets)
            recorder.phase = "backward"
            loss.backward()
            recorder.phase = "optimizer"
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    except Exception as exc:
        if not track_peak:
            raise
        optimizer.zero_grad(set_to_none=True)
        peak.error = peak.error or " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    return recorder, saved, peak


def merge(operators: list[Operator]) -> tuple[Operator, ...]:
    """Identical records (same :attr:`Operator.key`) as one, their counts added, in order of
    first appearance."""
    import dataclasses

    merged: dict[tuple[Any, ...], Operator] = {}
    for o in operators:
        seen = merged.get(o.key)
        merged[o.key] = o if seen is None else dataclasses.replace(seen, count=seen.count + o.count)
    return tuple(merged.values())


def _nbytes(t: Any) -> int:
    return int(t.numel() * t.element_size())


def _warm_up(optimizer: Any, params: list[Any]) -> bool:
    """One untraced optimizer step on zero gradients, so the traced step finds its state
    (momentum buffers, moments) created, as every step after the first does. False when the
    optimizer cannot step this way (it needs a closure, say)."""
    import torch

    try:
        with torch.no_grad():
            for p in params:
                p.grad = torch.zeros_like(p)
        optimizer.step()
        return True
    except Exception:  # the traced step then shows the first step's extra kernels
        return False
    finally:
        for p in params:
            p.grad = None


class _Recorder:
    """The dispatch mode: every aten op's kernels, tagged with the current phase; nothing
    while ``suppressed`` (ops whose kernels were recorded another way)."""

    def __init__(self, on_device: Callable[[Any], bool]) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(
                self, func: Any, types: Any, args: Any = (), kwargs: Any = None
            ) -> Any:
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                out = conv_output(func, args, out, "cuda")
                if not recorder.suppressed:
                    recorder.record(func, args, kwargs, out)
                return out

        self._mode = Mode()
        self.on_device = on_device
        self.phase = "forward"
        self.suppressed = 0
        self.operators: list[Operator] = []

    def record(self, func: Any, args: Any, kwargs: dict[str, Any], out: Any) -> None:
        if is_multi_tensor(func):
            found = multi_tensor_records(func, args, kwargs, self.phase, self.on_device)
        else:
            found = records(func, args, kwargs, out, self.phase, self.on_device)
        self.operators.extend(found)

    def __enter__(self) -> _Recorder:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)


class _SavedTensors:
    """``saved_tensors_hooks``: the bytes of the distinct storages autograd keeps for the
    backward pass, parameters left out (they are counted as parameters). Storages are held
    weakly, so the hooks keep nothing alive that the step would free."""

    def __init__(self, params: list[Any]) -> None:
        from torch.utils.weak import WeakIdKeyDictionary

        self._params = {p.untyped_storage()._cdata for p in params}
        self._seen: Any = WeakIdKeyDictionary()
        self.bytes = 0

    def pack(self, t: Any) -> Any:
        storage = t.untyped_storage()
        if storage._cdata not in self._params and storage not in self._seen:
            self._seen[storage] = True
            self.bytes += int(storage.nbytes())
        return t

    def unpack(self, t: Any) -> Any:
        return t


class _CudaPaths:
    """Within: the ops whose CPU / meta path differs from CUDA's take CUDA's.

    ``F.dropout`` (out of place, training, 0 < p < 1) runs as ``native_dropout``, the one
    fused kernel CUDA launches (the CPU and meta device take a bernoulli + div + mul path;
    in-place dropout is left alone: CUDA takes that path too). Scaled dot-product attention
    on meta tensors runs as the fused kernel CUDA takes (:mod:`.cuda_attention`; the meta
    device takes the math path, whose score matrix a GPU never writes). Recurrent layers
    (``torch.lstm``/``gru``/``rnn_*``, unpacked input, no projection) run as usual but are
    recorded as cuDNN's kernels (:mod:`.recurrent`), in the forward and the backward pass.
    """

    def __init__(self, recorder: _Recorder) -> None:
        import torch
        from torch.overrides import TorchFunctionMode

        functional = torch.nn.functional
        cells = {
            torch.lstm: "lstm",
            torch.gru: "gru",
            torch.rnn_tanh: "rnn_tanh",
            torch.rnn_relu: "rnn_relu",
        }

        class Mode(TorchFunctionMode):
            def __torch_function__(
                self, func: Any, types: Any, args: Any = (), kwargs: Any = None
            ) -> Any:
                kwargs = kwargs or {}
                if func is functional.dropout or func is torch.dropout:
                    fused = fused_dropout(func is torch.dropout, *args, **kwargs)
                    if fused is not None:
                        return fused
                if func is functional.scaled_dot_product_attention:
                    fused = fused_attention(*args, **kwargs)
                    if fused is not None:
                        return fused
                cell = cells.get(func) if not kwargs else None
                if cell is not None and _unpacked(cell, args):
                    return _recorded_recurrent(recorder, cell, func, args)
                return func(*args, **kwargs)

        self._mode = Mode()

    def __enter__(self) -> _CudaPaths:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)


def fused_dropout(aten_style: bool, *args: Any, **kwargs: Any) -> Any:
    """``native_dropout``'s output where CUDA would take its fused kernel, else None.
    ``F.dropout(input, p=0.5, training=True, inplace=False)`` or, ``aten_style``,
    ``torch.dropout(input, p, train)``."""
    import torch

    names = ("input", "p", "train") if aten_style else ("input", "p", "training", "inplace")
    bound = {**dict(zip(names, args, strict=False)), **kwargs}
    x, p = bound["input"], float(bound.get("p", 0.5))
    training = bool(bound.get("train", bound.get("training", True)))
    if bound.get("inplace") or not training or not 0.0 < p < 1.0 or x.numel() == 0:
        return None
    return torch.native_dropout(x, p, True)[0]


def _unpacked(cell: str, args: Any) -> bool:
    """Whether a ``torch.<cell>`` call is the unpacked overload (input, hx, params,
    has_biases, layers, dropout, train, bidirectional, batch_first) without LSTM
    projections (2 or 4 parameters per layer and direction)."""
    if len(args) != 9 or not isinstance(args[3], bool):
        return False
    per = (4 if args[3] else 2) * int(args[4]) * (2 if args[7] else 1)
    return len(args[2]) == per


def _recorded_recurrent(recorder: _Recorder, cell: str, func: Any, args: Any) -> Any:
    """Run ``func(*args)`` unrecorded inside an autograd function whose forward and backward
    record cuDNN's kernels for the layer stack."""
    import torch

    x, hx, params = args[0], args[1], list(args[2])
    has_bias, layers, dropout, train, bidir, batch_first = args[3:9]
    hx_list = list(hx) if isinstance(hx, list | tuple) else [hx]
    steps, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    spec = {
        "steps": int(steps),
        "batch": int(batch),
        "input_size": int(x.shape[-1]),
        "hidden": int(hx_list[0].shape[-1]),
        "layers": int(layers),
        "directions": 2 if bidir else 1,
        "dropout": float(dropout) if train else 0.0,
        "input_grad": bool(x.requires_grad),
        "bias": bool(has_bias) and any(p.requires_grad for p in params[2::4] if has_bias),
        "dtype": str(x.dtype).removeprefix("torch."),
    }
    n_hx = len(hx_list)

    class Recurrent(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *tensors: Any) -> Any:
            inp, h, p = tensors[0], tensors[1 : 1 + n_hx], list(tensors[1 + n_hx :])
            recorder.suppressed += 1
            try:
                out = func(inp, tuple(h) if isinstance(hx, list | tuple) else h[0], p, *args[3:])
            finally:
                recorder.suppressed -= 1
            recorder.operators.extend(recurrent_records(cell, "forward", **spec))
            return tuple(out)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            recorder.operators.extend(recurrent_records(cell, "backward", **spec))
            recorder.suppressed += 1
            try:
                return tuple(
                    torch.empty_like(t) if need else None
                    for t, need in zip(inputs, ctx.needs_input_grad, strict=True)
                )
            finally:
                recorder.suppressed -= 1

    inputs = (x, *hx_list, *params)
    out = Recurrent.apply(*inputs)
    if cell == "lstm":
        return out[0], out[1], out[2]
    return out[0], out[1]
