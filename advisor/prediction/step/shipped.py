"""The built-in workloads' traced steps, made once and shipped with the advisor (issue #46).

A cold ``advisor suggest --model fcn`` traced fcn's step on the meta device at each per-GPU
batch and under each plan layout before its first answer: about 2 s of a 6 s first answer on
a 2-core machine (fake tensors, and the optimizer's first step importing ``torch._dynamo``).
Those traces are pure functions of the workload's code, the tracer's code and PyTorch's
version, so they are taken once, for what the first answer of each built-in workload's
default space asks (``python -m advisor.shipped_traces`` writes them), and shipped in
``search_spaces/workloads/traced_steps.json.gz`` under their usual keys
(``traces.trace_key``, ``memory.plan.traced_memory``'s), with a stamp: the PyTorch version and
a hash of the source they come from (``probes/`` and ``search_spaces/workloads/``). A process
whose stamp differs (another PyTorch, an edited tracer or workload) never reads them and
traces as before; ``tests/prediction/step/test_shipped.py`` checks that the shipped file is
current and that a trace taken now equals the shipped one.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata, util
from pathlib import Path
from typing import Any

FILE = "traced_steps.json.gz"
SOURCES = ("advisor.probes", "advisor.search_spaces.workloads")  # what a trace is made by
SHIPPED_NOTE = "traced once and shipped with the advisor (advisor.shipped_traces)"


def path() -> Path:
    """Where the shipped traces lie (beside the built-in workloads)."""
    return package_dir("advisor.search_spaces.workloads") / FILE


def stamp() -> str:
    """What the traces depend on: PyTorch's version and a hash of the tracing source."""
    digest = hashlib.sha256()
    for package in SOURCES:
        root = package_dir(package)
        for file in sorted(root.rglob("*.py")):
            digest.update(file.relative_to(root).as_posix().encode())
            digest.update(file.read_bytes())
    return f"torch {_torch_version()}; source {digest.hexdigest()[:16]}"


def trace(key: str) -> Any:
    """The shipped operator trace under ``key`` (an ``OperatorTrace``), or None."""
    value = _lookup(key)
    if value is None:
        return None
    from advisor.probes.operators.types import OperatorTrace

    return OperatorTrace.from_dict(value)


def data(key: str) -> dict[str, Any] | None:
    """The shipped JSON object under ``key`` (a plan's peak lines), or None."""
    return _lookup(key)


_taking = False  # traces are being taken to ship: none is read from the shipped file


@contextmanager
def unread() -> Iterator[None]:
    """Nothing shipped is read while inside (the traces are being taken to ship)."""
    global _taking
    before, _taking = _taking, True
    try:
        yield
    finally:
        _taking = before


def _lookup(key: str) -> dict[str, Any] | None:
    if _taking:
        return None
    value = _entries().get(key)
    return value if isinstance(value, dict) else None


@functools.lru_cache(maxsize=1)
def _entries() -> dict[str, Any]:
    """The shipped entries when their stamp is this process's, else none."""
    try:
        with gzip.open(path(), "rt", encoding="utf-8") as f:
            shipped = json.load(f)
    except (OSError, ValueError):  # not shipped (a source checkout without it), unreadable
        return {}
    if not isinstance(shipped, dict) or shipped.get("stamp") != stamp():
        return {}
    entries = shipped.get("entries")
    return entries if isinstance(entries, dict) else {}


def package_dir(name: str) -> Path:
    """The folder of package ``name`` (its parent packages imported, not it)."""
    spec = util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(name)
    return Path(next(iter(spec.submodule_search_locations)))


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def save(entries: dict[str, Any]) -> dict[str, Any]:
    """Write ``entries`` (JSON by key) as the shipped file under this process's stamp."""
    shipped = {"stamp": stamp(), "entries": dict(sorted(entries.items()))}
    with gzip.GzipFile(path(), "wb", mtime=0) as f:  # the same bytes for the same traces
        f.write(json.dumps(shipped, sort_keys=True, separators=(",", ":")).encode())
    _entries.cache_clear()
    return shipped


def shipped_notes(entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` with its tracing time (this build's, not the user's) told as shipped."""
    notes = entry.get("notes")
    if isinstance(notes, list):
        entry["notes"] = [SHIPPED_NOTE if str(n).startswith("traced in ") else n for n in notes]
    return entry
