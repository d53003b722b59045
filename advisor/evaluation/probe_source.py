"""Where ``advisor predict`` gets its probe: a saved file, the one ``advisor suggest`` cached,
a probe run here now, or -- for a model too big or too slow for this machine -- a stand-in for
a model traced without running it (``evaluation.untimed``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError

if TYPE_CHECKING:
    from advisor.probes.result import ProbeRequest, ProbeResult

Note = Callable[[str], None]
RunProbe = Callable[["ProbeRequest"], "ProbeResult"]


def load_probe(path: str | Path) -> ProbeResult:
    """A probe saved by ``advisor probe --json`` (or ``ProbeResult.to_json``)."""
    from advisor.probes.result import ProbeResult

    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise AdvisorError(
            f"Cannot read probe file {path} ({exc}).", "pass a probe JSON file."
        ) from exc
    if isinstance(data, dict) and isinstance(data.get("probe"), dict):
        data = data["probe"]
    try:
        return ProbeResult.from_dict(data)
    except (TypeError, ValueError) as exc:
        raise AdvisorError(
            f"{path} is not a probe result ({exc}).",
            "save one with `advisor probe --json` or ProbeResult.to_json().",
        ) from exc


def cached_probe(
    model: str,
    batch_size: int,
    framework: str = "torch",
    threads: int | None = None,
    storage: str | None = None,
    iterations: int = 8,
) -> ProbeResult | None:
    """The probe ``advisor suggest`` cached for ``model`` at ``batch_size`` on this machine
    (same thread count and probe length), or None; never creates a storage."""
    import os

    from advisor.evaluation.local import ProbeCache, probe_cache_key
    from advisor.evaluation.workload import WorkloadInfo
    from advisor.storage.urls import resolve_storage

    url = resolve_storage(storage)
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return None
    if threads is None:
        try:
            threads = max(1, len(os.sched_getaffinity(0)))  # as LocalBackend counts them
        except AttributeError:  # not on Linux
            threads = os.cpu_count() or 1
    workload = WorkloadInfo(name=model, framework=framework, n_train=1)
    try:
        cache = ProbeCache(url)
        # issue #19: the epochs anchor's probe is cached under its own key (it also measured
        # the gradient noise scale, after the same timed iterations)
        for noise in (False, True):
            probe = cache.get(probe_cache_key(workload, batch_size, threads, iterations, {}, noise))
            if probe is not None and probe.ok:
                return probe
    except Exception:  # an unreadable cache only means probing again
        return None
    return None


def obtain_probe(
    model: str,
    batch_size: int,
    framework: str = "torch",
    threads: int | None = None,
    note: Note | None = None,
    run_probe: RunProbe | None = None,
    n_train: int | None = None,
    n_val: int | None = None,
) -> tuple[ProbeResult, Any]:
    """The probe of ``model`` at ``batch_size``: the one ``advisor suggest`` cached here,
    else -- after tracing the step on the meta device -- a stand-in traced without a local
    timing when a probe would not fit this machine, else a probe run now (``run_probe``,
    default ``advisor.probes.runner.run_probe``). Returns the probe and the trace already
    taken (None when none was), so it is not taken twice."""
    from advisor.evaluation.untimed import decide, untimed_probe
    from advisor.probes.result import ProbeRequest

    say = note or (lambda _text: None)
    cached = cached_probe(model, batch_size, framework, threads)
    if cached is not None:
        say(f"Using the probe advisor suggest cached for {model} at batch {batch_size}.")
        return cached, None
    decision = decide(model, batch_size, framework)
    if decision is not None and not decision.feasible:
        say(f"Traced without a local timing ({decision.reason}).")
        stand_in = untimed_probe(
            model, batch_size, decision, framework, n_train=n_train, n_val=n_val
        )
        return stand_in, decision.trace
    if run_probe is None:
        from advisor.probes.runner import run_probe as run

        run_probe = run
    request = ProbeRequest(workload=model, batch_size=batch_size, framework=framework,
                           threads=threads)  # fmt: skip
    return run_probe(request), None if decision is None else decision.trace
