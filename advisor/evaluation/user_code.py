"""A user's model run at arm's length by the evaluation (issue #50): its builder, data and step
in the isolated worker (``advisor.probes.isolated``), a built-in workload here.

What the advisor runs of a ``--model module:function`` outside a probe -- the operator trace
(``probes.operators.trace_workload`` isolates it itself), a probe made ready for prediction
(its trace and DataLoader time, ``prediction.step.ready.traced``), a stand-in's DataLoader
timing (``prediction.step.loader.time_loader``) and the builder's dataset sizes -- goes
through :func:`run_model_code`: an exit, a crash, a hang past the time-out or a runaway
allocation becomes one ``UserCodeError`` line naming the model and the fix. A built-in
workload runs in this process: its code is the advisor's own, and this is on the path of
every ``suggest`` and ``predict``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from advisor.search_spaces.workloads import ModelRef

T = TypeVar("T")


def run_model_code(model: str, doing: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``: in the isolated worker when ``model`` is a user's
    ``module:function`` (``doing`` says what it runs, for the error: "timing its DataLoader
    at batch 32"), else here. ``fn`` must be a top-level function."""
    if not ModelRef(model).is_user:
        return fn(*args, **kwargs)
    from advisor.probes.isolated import call_isolated

    return call_isolated(fn, *args, what=f"--model {model} ({doing})", **kwargs)


@contextlib.contextmanager
def arms_length(
    model: str | None,
    timeout_s: float | None = None,
    deadline: float | None = None,
    probe: Any = None,
) -> Iterator[None]:
    """Within: each call into a model's code ends after ``timeout_s`` wall seconds and by
    ``deadline`` (``probes.isolated.time_limit``); the worker is started now for a user
    ``model`` (None: no model to start it for; both workers for an ``hf:`` model, whose deep
    traces run side by side), so that its imports overlap this process's,
    unless ``probe``, the probe at hand, has its trace and loader time already."""
    from advisor.prediction.step.ready import needs_trace
    from advisor.probes.isolated import prestart, time_limit

    if model is not None and ModelRef(model).is_user and (probe is None or needs_trace(probe)):
        prestart(2 if model.startswith("hf:") else 1)  # a deep hf: model's traces: two workers
    with time_limit(timeout_s, deadline):
        yield


def traced_probe(
    probe: Any,
    hyperparameters: dict[str, Any] | None = None,
    trace: Any = None,
    meta_only: bool = False,
) -> tuple[Any, tuple[str, ...]]:
    """``prediction.step.ready.traced`` of ``probe`` (its operator trace and DataLoader time,
    and notes on what could not be taken), a user model's in the isolated worker."""
    from advisor.prediction.step.ready import needs_trace, traced

    if not needs_trace(probe):
        return probe, ()
    doing = f"traced and its DataLoader timed at batch {probe.batch_size}"
    return run_model_code(
        probe.workload, doing, traced, probe, hyperparameters, trace=trace, meta_only=meta_only
    )
