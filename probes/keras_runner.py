"""The Keras (TensorFlow 2.x, Keras 3) probe: the hooks of
:class:`~advisor.probes.framework.FrameworkRunner`, with the same phases as the PyTorch probe.

The timing hook is :class:`advisor.probes.keras.ProbeCallback`; the probe's time box stops
``fit`` after the step where it runs out (``model.stop_training``, which Keras 3 checks after
every batch). :func:`probe_in_process` runs in the child process started by
:func:`advisor.probes.runner.run_probe` (``framework="keras"``); :func:`train` (re-exported
from :mod:`advisor.probes.keras`) really trains.

FLOPs come from TensorFlow's registered op statistics (what ``tf.profiler``'s
``float_operation`` sums) over the graph of the forward pass at batch 1. Only the
matrix-product ops (Conv2D, MatMul, BatchMatMul, ...) are counted, two FLOPs per multiply-add,
which is what torch's ``FlopCounterMode`` counts. A training iteration counts each such op
three times (forward, input gradient, weight gradient), twice for ops fed by the model input
alone (no input gradient is computed there, as in torch). Recurrent layers are unrolled in a
throw-away clone so that every step of their loop is counted.

Importing this module imports Keras and TensorFlow: import it only where they are needed.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np
from advisor.probes.framework import FrameworkRunner, Prepared, TimeBox, Timed
from advisor.probes.gradient_noise import NOISE_BATCHES, NoiseScale
from advisor.probes.host import cpu_model
from advisor.probes.keras import LossDiverged, ProbeCallback, train
from advisor.probes.keras_data import as_dataset
from advisor.probes.result import ProbeRequest
from advisor.search_spaces.workloads import ModelRef
from advisor.search_spaces.workloads.setups import KerasSetup

__all__ = [
    "KerasRunner",
    "LossDiverged",
    "configure",
    "flops_per_training_sample",
    "matmul_flops_per_sample",
    "probe_in_process",
    "train",
]

FLOPS_METHOD = (
    "TensorFlow op statistics (tf.profiler float_operation) on the forward graph at batch 1, "
    "matrix-product ops only (2 FLOPs per multiply-add, as torch FlopCounterMode); training = "
    "3x forward, 2x for ops fed by the input alone (no input gradient)"
)
MATMUL_OPS = frozenset(
    {
        "Conv2D",
        "Conv3D",
        "DepthwiseConv2dNative",
        "MatMul",
        "BatchMatMul",
        "BatchMatMulV2",
        "BatchMatMulV3",
        "Einsum",
        "_FusedConv2D",
        "_FusedMatMul",
    }
)


def configure(threads: int | None, device: str = "cpu") -> int:
    """Set TensorFlow's thread pools (before anything runs) and hide GPUs for ``cpu``.

    Returns the number of threads in use. Call once per process, before building a model.
    """
    import tensorflow as tf

    n = threads or os.cpu_count() or 1
    try:
        tf.config.threading.set_intra_op_parallelism_threads(n)
        tf.config.threading.set_inter_op_parallelism_threads(n)
        if device == "cpu":
            tf.config.set_visible_devices([], "GPU")
    except RuntimeError:  # the runtime is already initialised: keep its settings
        n = tf.config.threading.get_intra_op_parallelism_threads() or n
    return n


@dataclass
class _State:
    setup: KerasSetup
    train_data: Any
    val_data: Any
    steps: int


class _TimeBoxCallback(keras.callbacks.Callback):
    """Applies the probe's :class:`TimeBox`: stops ``fit`` after the step where it runs out."""

    def __init__(self, box: TimeBox) -> None:
        super().__init__()
        self.box = box

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.box.start()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.box.after_step():
            self.model.stop_training = True


class KerasRunner(FrameworkRunner):
    """Keras 3 on TensorFlow: ``model.fit`` for one epoch of k steps, timed by callbacks."""

    name = "keras"
    init_measured = "measured: process start to the first training batch's begin hook"

    def configure(self, request: ProbeRequest) -> int:
        return configure(request.threads, request.device)

    def prepare(self, request: ProbeRequest) -> Prepared:
        b, k, vb = request.batch_size, request.iterations, request.validation_batches
        builder, real_train, real_val = _resolve(request.workload)
        sizes: dict[str, int] = {}
        if real_train is not None and real_val is not None:
            # A built-in: generate only what the probe uses (k batches, a bounded validation
            # slice); a user builder keeps its own data sizes.
            gen_k = max(k, NOISE_BATCHES) if request.gradient_noise else k  # issue #19
            sizes = {
                "n_train": b * gen_k,
                "n_val": min(b * (vb if vb is not None else 4), real_val),
            }
        setup = builder(batch_size=b, seed=request.seed, **sizes, **request.hyperparameters)
        if not isinstance(setup, KerasSetup):
            raise TypeError(
                f"a Keras builder must return KerasSetup, but got {type(setup).__name__}"
            )
        n_train = real_train or setup.n_train or setup.train_samples() or b * k
        n_val = real_val if real_val is not None else (setup.n_val or setup.val_samples() or 0)
        given = setup.train_samples()
        steps = k if given is None else min(k, given // b)
        if steps < 2:
            raise ValueError(
                f"the training data holds {given} samples: fewer than 2 batches of {b}"
            )
        # The inputs are converted before fit, as in a real run (part of initialisation).
        convert_start = time.perf_counter()
        train_data = as_dataset(setup.train, b, shuffle=True)
        val_data = as_dataset(setup.val, b, shuffle=False)
        convert_s = time.perf_counter() - convert_start
        data_s = setup.data_s
        return Prepared(
            state=_State(setup, train_data, val_data, steps),
            n_train=n_train,
            n_val=0 if setup.val is None else n_val,
            data_s=data_s,
            data_samples=setup.data_samples or 0,
            # generation and conversion to the tf.data input both grow with the data
            prepare_s=None if data_s is None else data_s + convert_s,
            prepare_detail=(
                f"generation {data_s or 0:.3f} s, conversion to tf.data {convert_s:.3f} s"
            ),
            generated_train_samples=given,
        )

    def run_iterations(self, prepared: Prepared, request: ProbeRequest, box: TimeBox) -> Timed:
        state: _State = prepared.state
        cb = ProbeCallback()
        box.total = state.steps
        state.setup.model.fit(
            state.train_data,
            epochs=1,
            shuffle=False,  # the dataset shuffles itself
            steps_per_epoch=state.steps,
            callbacks=[cb, _TimeBoxCallback(box), *state.setup.callbacks],
            verbose=0,
        )
        if cb.diverged:
            raise LossDiverged(f"loss became {cb.losses[-1]} during the probe")
        wall = cb.first_batch_wall or time.time()
        return Timed(cb.iteration_s, cb.step_ends, cb.cpu_s, wall, cb.first_batch_cpu)

    def validation_pass(self, prepared: Prepared, request: ProbeRequest) -> tuple[float, int]:
        state: _State = prepared.state
        setup, b = state.setup, request.batch_size
        # numpy validation data is already the slice to run; a dataset is cut at vb batches
        val_steps = None if isinstance(setup.val, tuple | list) else request.validation_batches
        cb = ProbeCallback()
        setup.model.evaluate(
            state.val_data, steps=val_steps, callbacks=[cb, *setup.callbacks], verbose=0
        )
        given_val = setup.val_samples()
        measured = given_val if given_val is not None else b * (val_steps or 1)
        if val_steps is not None:
            measured = min(measured, b * val_steps)
        return cb.validation_s[-1], measured

    def gradient_noise(self, prepared: Prepared, request: ProbeRequest) -> NoiseScale | None:
        """Issue #19: ``B_simple`` on the probe's training dataset, after the timing."""
        from advisor.probes.gradient_noise_frameworks import keras_noise_for_probe

        state: _State = prepared.state
        return keras_noise_for_probe(state.setup.model, state.train_data)  # own time box

    def flops(self, prepared: Prepared, request: ProbeRequest) -> tuple[float | None, str]:
        per_sample, note = flops_per_training_sample(prepared.state.setup)
        return (None if per_sample is None else per_sample * request.batch_size), note

    def input_bytes_per_sample(self, prepared: Prepared, request: ProbeRequest) -> float | None:
        """Issue #27: the first training batch's inputs' bytes over its sample count."""
        batch = next(iter(prepared.state.train_data.take(1)))
        inputs = batch[0] if isinstance(batch, tuple | list) else batch
        parts = (
            list(inputs.values())
            if isinstance(inputs, dict)
            else (list(inputs) if isinstance(inputs, tuple | list) else [inputs])
        )
        total = sum(
            int(np.prod(t.shape)) * np.dtype(t.dtype.as_numpy_dtype).itemsize for t in parts
        )
        rows = int(parts[0].shape[0]) if parts and len(parts[0].shape) else 0
        return total / rows if total and rows else None

    def model_size(self, prepared: Prepared) -> tuple[int, int]:
        weights = prepared.state.setup.model.trainable_weights
        return (
            int(sum(int(np.prod(w.shape)) for w in weights)),
            int(sum(int(np.prod(w.shape)) * np.dtype(w.dtype).itemsize for w in weights)),
        )

    def is_oom(self, exc: BaseException) -> bool:
        """MemoryError or TensorFlow's ``ResourceExhaustedError`` (its out-of-memory error)."""
        import tensorflow as tf

        return isinstance(exc, MemoryError | tf.errors.ResourceExhaustedError)

    def fingerprint(self, threads: int, device: str) -> dict[str, Any]:
        import tensorflow as tf

        return {
            "framework": "keras",
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpu_model": cpu_model(),
            "device_name": cpu_model(),
            "cpu_count": os.cpu_count(),
            "threads": threads,
            "gpus": len(tf.config.list_physical_devices("GPU")),
        }


def flops_per_training_sample(setup: KerasSetup) -> tuple[float | None, str]:
    """FLOPs of one training step per sample (see the module docstring) and how counted.

    Returns ``(None, reason)`` when TensorFlow cannot count the model's graph.
    """
    try:
        _, train = matmul_flops_per_sample(setup.model, _input_spec(setup.train))
    except Exception as exc:  # counting is best effort; the timings do not depend on it
        return None, f"not counted ({type(exc).__name__}: {exc})"[:300]
    if train <= 0:
        return None, "not counted: TensorFlow found no matrix-product ops"
    return train, FLOPS_METHOD


def matmul_flops_per_sample(model: Any, input_spec: Any) -> tuple[float, float]:
    """``(forward, training)`` matrix-product FLOPs of ``model`` for one sample.

    ``input_spec`` is a ``tf.TensorSpec`` (or a nest of them) with batch dimension 1. Each
    op's FLOPs come from TensorFlow's own registered statistics (what ``tf.profiler``'s
    ``float_operation`` sums). Training counts each op three times (forward, input gradient,
    weight gradient), except ops whose data input depends on no trainable variable (the
    first layer): their input gradient is never computed, so they count twice.
    """
    import tensorflow as tf
    from tensorflow.python.framework import ops as tf_ops

    tf.get_logger().setLevel("ERROR")  # the v1 shape helpers log deprecation notices
    model = _unrolled(model)
    forward_fn = tf.function(lambda x: model(x, training=False), autograph=False)
    graph = forward_fn.get_concrete_function(input_spec).graph
    forward = train = 0.0
    needs_grad: dict[str, bool] = {}
    for op in graph.get_operations():  # topological order
        needs_grad[op.name] = op.type in ("ReadVariableOp", "VarHandleOp") or any(
            needs_grad.get(t.op.name, False) for t in op.inputs
        )
        if op.type not in MATMUL_OPS:
            continue
        flops = float(tf_ops.get_stats_for_node_def(graph, op.node_def, "flops").value or 0)
        data_needs_grad = bool(op.inputs) and needs_grad.get(op.inputs[0].op.name, False)
        forward += flops
        train += flops * (3 if data_needs_grad else 2)
    return forward, train


def _unrolled(model: Any) -> Any:
    """A clone with recurrent layers unrolled (their while-loop body is otherwise counted
    once), or ``model`` itself when it has none."""
    if not any(getattr(layer, "unroll", True) is False for layer in _layers(model)):
        return model

    def clone(layer: Any) -> Any:
        config = layer.get_config()
        if config.get("unroll") is False:
            config["unroll"] = True
        return layer.__class__.from_config(config)

    return keras.models.clone_model(model, clone_function=clone)


def _layers(model: Any) -> list[Any]:
    out: list[Any] = []
    for layer in getattr(model, "layers", []):
        out.append(layer)
        out.extend(_layers(layer))
    return out


def _input_spec(data: Any) -> Any:
    import tensorflow as tf

    if isinstance(data, tuple | list):
        x = data[0]
        return tf.nest.map_structure(
            lambda a: tf.TensorSpec([1, *np.shape(a)[1:]], tf.as_dtype(np.asarray(a).dtype)), x
        )
    x_spec = data.element_spec[0] if isinstance(data.element_spec, tuple) else data.element_spec
    return tf.nest.map_structure(lambda s: tf.TensorSpec([1, *s.shape[1:]], s.dtype), x_spec)


def _resolve(workload: str) -> tuple[Callable[..., Any], int | None, int | None]:
    from advisor.search_spaces.workloads import get, load_callable

    if ModelRef(workload).is_user:
        return load_callable(workload), None, None
    spec = get(workload)
    return spec.builder("keras"), spec.n_train, spec.n_val


RUNNER = KerasRunner()
probe_in_process = RUNNER.probe_in_process
