"""Where ``advisor predict`` gets its probe: a saved file, the one ``advisor suggest`` cached,
a probe run here now, or -- for a model too big or too slow for this machine -- a stand-in for
a model traced without running it (``evaluation.untimed``)."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError

if TYPE_CHECKING:
    from advisor.probes.result import ProbeRequest, ProbeResult

Note = Callable[[str], None]
RunProbe = Callable[["ProbeRequest"], "ProbeResult"]


MAX_PROBE_FILE_BYTES = 16 * 2**20  # a probe with its operator trace is tens of KiB
MAX_PROBE_DEPTH = 32  # nesting of a probe record (its operator trace is 5 deep)
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


def load_probe(path: str | Path) -> ProbeResult:
    """A probe saved by ``advisor probe --out/--json`` (or ``ProbeResult.to_json``; the last
    non-empty line when there are several), read once and checked: a regular file of at most
    ``MAX_PROBE_FILE_BYTES``, JSON nested at most ``MAX_PROBE_DEPTH`` deep, then the record's
    fields and bounds (``probe_from_data``). Anything else is one ``AdvisorError``."""
    path = Path(path)
    fix = "pass a file written by `advisor probe --out FILE` (or --json)."
    try:
        with open(path, "rb", opener=_nonblocking) as handle:  # a FIFO must not block
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise AdvisorError(f"The probe file {path} is not a regular file.", fix)
            raw = handle.read(MAX_PROBE_FILE_BYTES + 1)
    except OSError as exc:
        raise AdvisorError(f"Cannot read the probe file {path} ({exc.strerror}).", fix) from exc
    if len(raw) > MAX_PROBE_FILE_BYTES:
        raise AdvisorError(
            f"The probe file {path} is over {MAX_PROBE_FILE_BYTES // 2**20} MiB.", fix
        )
    try:
        lines = [ln for ln in raw.decode("utf-8").splitlines() if ln.strip()]
    except UnicodeDecodeError as exc:
        raise AdvisorError(f"The probe file {path} is not UTF-8 text ({exc.reason}).", fix) from exc
    if not lines:
        raise AdvisorError(f"The probe file {path} is empty.", fix)
    text = lines[-1] if len(lines) > 1 and lines[-1].lstrip().startswith("{") else "\n".join(lines)
    depth = _text_depth(text)
    if depth > MAX_PROBE_DEPTH:
        raise AdvisorError(
            f"The probe file {path} nests deeper than {MAX_PROBE_DEPTH} levels (a probe record "
            f"nests at most {MAX_PROBE_DEPTH}).",
            fix,
        )
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise AdvisorError(f"The probe file {path} is not JSON ({exc}).", fix) from exc
    return probe_from_data(data, f"The probe file {path}", fix)


def probe_from_data(data: Any, what: str, fix: str) -> ProbeResult:
    """The probe record ``data`` (a decoded ``ProbeResult.to_dict()``, or an object holding
    one as ``probe``), checked once for every reader -- ``advisor estimate``, ``advisor
    predict --probe``, the service's ``/v1/predict`` -- against the same bounds: nesting
    ``MAX_PROBE_DEPTH``, each field's type and range (``advisor.probes.result``: sizes 1 to
    ``MAX_SAMPLES``, timings finite and at most ``MAX_PROBE_SECONDS``), and an ok status.
    ``what`` names the source in the one-line ``AdvisorError``."""
    from advisor.probes.result import ProbeResult, check_count

    depth = _data_depth(data)
    if depth > MAX_PROBE_DEPTH:
        raise AdvisorError(
            f"{what} nests deeper than {MAX_PROBE_DEPTH} levels (a probe record nests at most "
            f"{MAX_PROBE_DEPTH}).",
            fix,
        )
    if isinstance(data, dict) and isinstance(data.get("probe"), dict):
        data = data["probe"]
    try:
        probe = ProbeResult.from_dict(data)
        if probe.ok:  # every runner writes the sizes it extrapolates to: 0 is no probe's
            check_count("n_train", probe.n_train, 1)
    except (TypeError, ValueError) as exc:
        raise AdvisorError(f"{what} is not a usable probe result ({exc}).", fix) from exc
    if not probe.ok:
        raise AdvisorError(
            f"{what} holds a failed probe ({probe.status}: {probe.reason}).",
            "probe again (e.g. a smaller batch size) and pass the new file.",
        )
    return probe


def check_sizes(n_train: int | None, n_val: int | None) -> None:
    """``n_train``/``n_val`` given to ``advisor.predict`` within a probe record's bounds."""
    from advisor.probes.result import MAX_SAMPLES

    for name, size, low in (("--n-train", n_train, 1), ("--n-val", n_val, 0)):
        if size is not None and not low <= size <= MAX_SAMPLES:
            raise AdvisorError(
                f"{name} must be from {low} to {MAX_SAMPLES:,}, but got {size}.",
                f"pass the dataset's size, e.g. {name} 50000.",
            )


def _nonblocking(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NONBLOCK)


def _text_depth(text: str) -> int:
    """How deep the JSON ``text`` nests, without decoding it (the decoder recurses)."""
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub('""', text))
    depth = deepest = 0
    for char in brackets:
        depth += 1 if char in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_PROBE_DEPTH:
                break  # deeper than allowed: how much deeper does not matter
    return deepest


def _data_depth(data: Any) -> int:
    """How deep decoded JSON nests, walked without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if depth <= MAX_PROBE_DEPTH:
                values = node.values() if isinstance(node, dict) else node
                stack.extend((v, depth + 1) for v in values)
    return deepest


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
    timeout_s: float | None = None,
) -> tuple[ProbeResult, Any]:
    """The probe of ``model`` at ``batch_size``: the one ``advisor suggest`` cached here,
    else -- after tracing the step on the meta device -- a stand-in traced without a local
    timing when a probe would not fit this machine, else a probe run now (``run_probe``,
    default ``advisor.probes.runner.run_probe``). Returns the probe and the trace already
    taken (None when none was), so it is not taken twice. ``timeout_s``: the probe's, in
    wall seconds (default 300)."""
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
                           threads=threads, timeout_s=timeout_s or 300.0)  # fmt: skip
    return run_probe(request), None if decision is None else decision.trace
