"""The Keras (TensorFlow 2.x, Keras 3) probe: the same phases as the PyTorch probe.

The timing hook is :class:`advisor.probes.keras.ProbeCallback`. :func:`probe_in_process` runs k iterations and two validation passes of a
workload and returns a :class:`~advisor.probes.result.ProbeResult`; it runs in the child
process started by :func:`advisor.probes.runner.run_probe` (``framework="keras"``).

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

import math
import platform
import time
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
from advisor.probes.host import cpu_model, peak_rss_bytes
from advisor.probes.keras import ProbeCallback, ProgressFn
from advisor.probes.keras_data import as_dataset
from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.search_spaces.workloads.setups import KerasSetup

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


class LossDiverged(RuntimeError):
    """The training loss became NaN or infinite."""


def probe_in_process(request: ProbeRequest, on_progress: ProgressFn | None = None) -> ProbeResult:
    """Time ``request.iterations`` training iterations and two validation passes, here.

    Failures (out of memory, NaN loss, any error in the workload) come back as a result with
    ``status`` oom/nan/error and the reason in ``error``; they are not raised.
    """
    started = request.process_start if request.process_start is not None else time.time()
    try:
        return _probe(request, started, on_progress)
    except Exception as exc:  # reported, not raised: the caller compares many candidates
        status = "nan" if isinstance(exc, LossDiverged) else "oom" if _is_oom(exc) else "error"
        threads = request.threads or os.cpu_count() or 1
        return ProbeResult.failure(
            request,
            status,
            f"{type(exc).__name__}: {exc}",
            time.time() - started,
            framework="keras",
            threads=threads,
            peak_host_memory_bytes=peak_rss_bytes(),
            fingerprint=_fingerprint(threads),
        )


def _probe(request: ProbeRequest, started: float, on_progress: ProgressFn | None) -> ProbeResult:
    threads = configure(request.threads, request.device)
    b, k, vb = request.batch_size, request.iterations, request.validation_batches
    builder, real_train, real_val = _resolve(request.workload)
    sizes: dict[str, int] = {}
    if real_train is not None and real_val is not None:
        # A built-in: generate only what the probe uses (k batches, a bounded validation
        # slice); a user builder keeps its own data sizes.
        sizes = {"n_train": b * k, "n_val": min(b * (vb if vb is not None else 4), real_val)}
    setup = builder(batch_size=b, seed=request.seed, **sizes, **request.hyperparameters)
    if not isinstance(setup, KerasSetup):
        raise TypeError(f"a Keras builder must return KerasSetup, but got {type(setup).__name__}")
    n_train = real_train or setup.n_train or setup.train_samples() or b * k
    n_val = real_val if real_val is not None else (setup.n_val or setup.val_samples() or 0)
    if setup.val is None:
        n_val = 0

    given = setup.train_samples()
    steps = k if given is None else min(k, given // b)
    if steps < 2:
        raise ValueError(f"the training data holds {given} samples: fewer than 2 batches of {b}")
    cb = ProbeCallback(on_progress=on_progress, total=steps)
    callbacks = [cb, *setup.callbacks]
    # The inputs are converted before fit, as in a real run (part of initialisation).
    convert_start = time.perf_counter()
    train_data = as_dataset(setup.train, b, shuffle=True)
    val_data = as_dataset(setup.val, b, shuffle=False)
    convert_s = time.perf_counter() - convert_start
    setup.model.fit(
        train_data,
        epochs=1,
        shuffle=False,  # the dataset shuffles itself
        steps_per_epoch=steps,
        callbacks=callbacks,
        verbose=0,
    )
    if cb.diverged:
        raise LossDiverged(f"loss became {cb.losses[-1]} during the probe")

    measured_val = 0
    if val_data is not None and n_val > 0:
        given_val = setup.val_samples()
        # numpy validation data is already the slice to run; a dataset is cut at vb batches
        val_steps = None if isinstance(setup.val, tuple | list) else vb
        for p in range(2):
            setup.model.evaluate(
                val_data,
                steps=val_steps,
                callbacks=callbacks,
                verbose=0,
            )
            if on_progress is not None:
                on_progress("validation", p + 1, 2)
        measured_val = given_val if given_val is not None else b * (val_steps or 1)
        if val_steps is not None:
            measured_val = min(measured_val, b * val_steps)
    result = _result(request, threads, started, cb, setup, n_train, n_val, measured_val, convert_s)
    if request.gradient_noise:  # issue #19: gradient noise scale, after the timing
        from advisor.probes.gradient_noise import keras_noise_for_probe

        result = keras_noise_for_probe(result, setup.model, train_data, request.max_seconds)
    return result


def _result(
    request: ProbeRequest,
    threads: int,
    started: float,
    cb: ProbeCallback,
    setup: KerasSetup,
    n_train: int,
    n_val: int,
    measured_val: int,
    convert_s: float,
) -> ProbeResult:
    iterations = cb.iteration_s
    init_s = (cb.first_batch_wall or time.time()) - started
    init_note = "measured: process start to the first training batch's begin hook"
    if setup.data_s is not None and setup.data_samples and n_train + n_val > setup.data_samples:
        # generation and conversion to the tf.data input both grow with the data
        prepare_s = setup.data_s + convert_s
        extra = prepare_s * ((n_train + n_val) / setup.data_samples - 1.0)
        init_s += extra
        init_note = (
            f"measured, plus data preparation (generation {setup.data_s:.3f} s, conversion to "
            f"tf.data {convert_s:.3f} s) scaled from {setup.data_samples} generated samples "
            f"to {n_train + n_val} (+{extra:.3f} s)"
        )
    scale = n_val / measured_val if measured_val else 1.0
    validation: tuple[float, ...] = ()
    if len(cb.validation_s) >= 2:
        v1, v2 = cb.validation_s[0], cb.validation_s[1]
        # The first pass's extra cost (tracing the test step) is paid once, not per batch.
        validation = (max(v1 - v2, 0.0) + v2 * scale, v2 * scale)
    steady = sorted(iterations[1:]) or list(iterations)
    median = _median(steady) if steady else 0.0
    cpu = None
    span = cb.steady_span_s
    if len(cb.cpu_s) >= 2 and span > 0:
        cpu = min(1.0, (cb.cpu_s[-1] - cb.cpu_s[0]) / (span * threads))
    params = int(sum(int(np.prod(w.shape)) for w in setup.model.trainable_weights))
    grad_bytes = int(
        sum(
            int(np.prod(w.shape)) * np.dtype(w.dtype).itemsize
            for w in setup.model.trainable_weights
        )
    )
    flops_per_sample, flop_note = flops_per_training_sample(setup)
    fingerprint = _fingerprint(threads)
    fingerprint["flops_method"] = flop_note
    fingerprint["init_note"] = init_note
    fingerprint["generated_train_samples"] = setup.train_samples()
    return ProbeResult(
        workload=request.workload,
        framework="keras",
        batch_size=request.batch_size,
        device=request.device,
        threads=threads,
        init_s=init_s,
        iteration_s=iterations,
        validation_s=validation,
        validation_samples_measured=measured_val,
        validation_scale=scale,
        n_train=n_train,
        n_val=n_val,
        flops_per_iteration=(
            flops_per_sample * request.batch_size if flops_per_sample is not None else None
        ),
        parameters=params,
        gradient_bytes=grad_bytes,
        peak_host_memory_bytes=peak_rss_bytes(),
        samples_per_s=request.batch_size / median if median > 0 else None,
        cpu_utilisation=cpu,
        wall_s=time.time() - started,
        fingerprint=fingerprint,
        data_s=setup.data_s,
        data_samples=setup.data_samples or 0,
    )


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

    if ":" in workload:
        return load_callable(workload), None, None
    spec = get(workload)
    return spec.builder("keras"), spec.n_train, spec.n_val


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    text = f"{type(exc).__name__} {exc}"
    return "ResourceExhausted" in text or "OOM" in text or "out of memory" in text.lower()


def _fingerprint(threads: int) -> dict[str, Any]:
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


def train(
    setup: KerasSetup,
    epochs: int,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
    *,
    device: str = "cpu",
    patience: int | None = None,
) -> dict[str, Any]:
    """Really train ``setup`` for ``epochs`` epochs with ``model.fit`` (each epoch: all
    training batches, then one validation pass), timed by the same callback as the probe.

    Mirrors :func:`advisor.probes.torch_runner.train`: ``on_epoch(epoch, metrics)`` gets
    ``train_loss``, ``val_loss``, ``val_accuracy`` and ``epoch_s``; ``patience`` stops early
    after that many epochs without a lower validation loss. Returns ``runtime_s`` (first batch
    to the end), ``first_batch_wall``, ``epoch_s``, ``train_loss``, ``val_loss``,
    ``val_accuracy`` (per epoch), ``validation_s`` (per pass), ``first_iteration_s``,
    ``steady_iteration_s`` (median of iterations 2..), ``iterations`` and ``epochs_run``.
    ``device`` is accepted for symmetry; TensorFlow places ops itself. Raises
    :class:`LossDiverged` if the loss becomes NaN or infinite.
    """
    if epochs <= 0:
        raise ValueError(f"epochs must be > 0, but got {epochs}")
    cb = ProbeCallback()
    callbacks: list[Any] = [cb, *setup.callbacks]
    if patience is not None:
        callbacks.append(keras.callbacks.EarlyStopping(monitor="val_loss", patience=patience))

    def epoch_end(epoch: int, logs: dict[str, Any] | None) -> None:
        logs = logs or {}
        metrics = {
            "train_loss": float(logs.get("loss", float("nan"))),
            "val_loss": float(logs.get("val_loss", float("nan"))),
            "val_accuracy": float(logs.get("val_accuracy", float("nan"))),
            "epoch_s": cb.epoch_s[-1] if cb.epoch_s else float("nan"),
        }
        history.append(metrics)
        if not math.isfinite(metrics["train_loss"]):
            setup.model.stop_training = True
        if on_epoch is not None:
            on_epoch(epoch, metrics)

    history: list[dict[str, float]] = []
    # after `cb` in the list, so the epoch's duration is known when epoch_end runs
    callbacks.append(keras.callbacks.LambdaCallback(on_epoch_end=epoch_end))
    setup.model.fit(
        as_dataset(setup.train, setup.batch_size, shuffle=True),
        epochs=epochs,
        shuffle=False,  # the dataset shuffles itself
        validation_data=as_dataset(setup.val, setup.batch_size, shuffle=False),
        callbacks=callbacks,
        verbose=0,
    )
    end = time.perf_counter()
    if cb.diverged:
        raise LossDiverged(f"loss became {cb.losses[-1]}")
    iterations = cb.iteration_s
    steady = sorted(iterations[1:])
    return {
        "runtime_s": end - cb.first_batch_perf if cb.first_batch_perf is not None else 0.0,
        "first_batch_wall": cb.first_batch_wall,
        "epoch_s": list(cb.epoch_s),
        "train_loss": [m["train_loss"] for m in history],
        "val_loss": [m["val_loss"] for m in history],
        "val_accuracy": [m["val_accuracy"] for m in history],
        "validation_s": list(cb.validation_s),
        "first_iteration_s": iterations[0] if iterations else None,
        "steady_iteration_s": _median(steady) if steady else None,
        "iterations": len(iterations),
        "epochs_run": len(history),
    }


def _median(values: list[float]) -> float:
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
