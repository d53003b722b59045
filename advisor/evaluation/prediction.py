"""``advisor.predict``: one local probe -> predicted time and cost on machines not probed.

The Python face of ``advisor predict``: resolve the machines, take a saved probe or run one,
refine a PyTorch probe with a traced step, forecast every machine with the performance model
and the iteration-time model, and price each run through the one pricing path
(``advisor.providers.pricing``, spot restart overhead included).

Issue #27: one cost rule. Every figure is the whole job's -- the service's start-up terms and
the training, the billing rule applied once to the total -- in the machine rows and in the
per-epoch tables alike, as ``advisor suggest`` prices its rows (``job_priced``). A free
machine (this one) shows as free in the cost ratios, not as the divisor. TPU rows are marked
predicted only (advisor cannot train there), previous-generation types are marked, and a user
model whose probe did not measure its input size says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError
from advisor.search_spaces.workloads import ModelRef

if TYPE_CHECKING:
    from advisor.probes.perf.report import Forecast
    from advisor.probes.result import ProbeResult
    from advisor.providers.catalog import InstanceType

Note = Callable[[str], None]


@dataclass(frozen=True)
class Prediction:
    """What ``predict`` found: one ``Forecast`` per machine, fastest first."""

    workload: str
    batch_size: int
    epochs: int
    snapshot: str | None
    spot: bool
    probe: ProbeResult
    rows: list[Forecast]
    n_train: int
    n_val: int
    tables: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # issue #27: predicted-only, previous generation, input size

    @property
    def fastest(self) -> Forecast:
        """The shortest job (start-up + training; rows are sorted so)."""
        return self.rows[0]

    @property
    def cheapest(self) -> Forecast:
        """The cheapest job (billed start-up + training)."""
        return min(self.rows, key=job_cost)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document ``advisor predict --json`` prints."""
        return {
            "workload": self.workload,
            "batch_size": self.batch_size,
            "epochs": self.epochs,
            "snapshot": self.snapshot,
            "spot": self.spot,
            "probe": self.probe.to_dict(),
            "machines": [{**f.to_dict(), **machine_marks(f.machine, self.spot)} for f in self.rows],
            "notes": list(self.notes),
            "fastest": self.fastest.machine.key,
            "cheapest": self.cheapest.machine.key,
            "normalised": {
                k: {m: {str(c): v for c, v in row.items()} for m, row in t.items()}
                for k, t in self.tables.items()
            },
        }


def job_cost(f: Forecast) -> float:
    """USD of the whole job (its training alone when it has no job price)."""
    if f.job_cost_usd is not None:
        return f.job_cost_usd.value
    return f.estimate.cost.value if f.estimate.cost else 0.0


def machine_marks(machine: InstanceType, spot: bool) -> dict[str, Any]:
    """Issue #27: how a machine's price was obtained, its date and lifecycle, and why it is
    predicted only (None: advisor can train there)."""
    from advisor.evaluation.candidates import predicted_only

    return {
        "price_basis": machine.basis(spot),
        "price_date": machine.price_date,
        "price_source": machine.source,
        "lifecycle": machine.lifecycle,
        "predicted_only": predicted_only(machine),
    }


def job_priced(
    rows: Sequence[Forecast], n_train: int, n_val: int, batch_size: int, epochs: int, spot: bool
) -> list[Forecast]:
    """Issue #27: each row's estimate and epoch sweep as whole jobs -- the machine's start-up
    terms + training, billed once by the service's rule (``price_run``) -- so a row's cost, its
    job cost and the per-epoch tables follow the one rule ``advisor suggest`` prices with (the
    60 s minimum of a VM applies to the job, not to the training alone)."""
    from dataclasses import replace

    from advisor.probes.iteration_model import epoch_sweep

    out = []
    for f in rows:
        sweep = epoch_sweep(
            f.prediction.phases, n_train, n_val, batch_size, sorted({*f.sweep, epochs}),
            f.price_per_hour, spot=spot, service=f.machine.service, overheads=f.overheads,
        )  # fmt: skip
        out.append(replace(f, estimate=sweep[epochs], sweep=sweep))
    return out


def prediction_notes(model: str, probe: ProbeResult, machines: Sequence[InstanceType]) -> list[str]:
    """Issue #27: what the rows cannot say themselves -- TPU rows are predicted only, which
    types are previous generation or retired, and a user model's unmeasured input size."""
    from advisor.evaluation.candidates import predicted_only

    notes = []
    tpus = [m.key for m in machines if predicted_only(m)]
    if tpus:
        notes.append(
            f"Predicted only: {', '.join(tpus)} -- advisor cannot train or probe on TPUs (no "
            "PyTorch/XLA in its image), so advisor suggest never recommends them; the TPU "
            "efficiency is a prior (docs/calibration.md)."
        )
    old = [f"{m.key} ({m.lifecycle})" for m in machines if not m.current]
    if old:
        notes.append(
            f"Not current: {', '.join(old)}; advisor suggest leaves such types out unless "
            "--include-previous-generation."
        )
    if ModelRef(model).is_user and "input_bytes_per_sample" not in probe.fingerprint:
        notes.append(
            "Input size unknown: this probe of your model did not measure its input bytes per "
            "sample, so the host-to-device copy counts 0 bytes (probe again to measure it)."
        )
    return notes


def data_size(model: str, n_train: int, n_val: int, data_gb: float | None) -> tuple[float, str]:
    """Issue #14: bytes a cloud job downloads before training, and the basis of the figure:
    ``data_gb``, else a built-in workload's size model, else 0 (left out)."""
    if data_gb is not None:
        if not 0 <= data_gb < float("inf"):
            raise AdvisorError(f"--data-gb must be >= 0, got {data_gb}.", "give a size in GB.")
        return data_gb * 1e9, "--data-gb"
    if ModelRef(model).is_user:
        return 0.0, ""
    from advisor.search_spaces.workloads import get

    wl = get(model)
    shape = "x".join(map(str, wl.input_shape))
    return wl.data_bytes(n_train, n_val), f"{n_train + n_val:,} samples x fp32 {shape}, modelled"


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


def resolve_machines(
    names: str | Sequence[str], snapshot: str | None = None
) -> tuple[Any, list[InstanceType]]:
    """The catalog snapshot and the instances named (``p3.2xlarge``, ``sagemaker:...``,
    ``local``), comma-separated or as a list."""
    from advisor.providers import catalog as catalog_mod

    catalog = catalog_mod.load(snapshot)
    if isinstance(names, str):
        names = names.split(",")
    machines = []
    for name in (n.strip() for n in names):
        if not name:
            continue
        # catalog keys and the providers' own names (Standard_NC6s_v3, ml.p3.2xlarge,
        # n1-standard-8+T4) both resolve
        machines.append(
            catalog_mod.local_machine()
            if name in ("local", "local:local")
            else catalog.resolve(name)
        )
    if not machines:
        raise AdvisorError("No instances given.", "pass --instances p3.2xlarge,p2.xlarge,...")
    return catalog, machines


USER_MODEL_EPOCHS = 10  # a user model's run length without --epochs (as advisor suggest's)


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


def traced(probe: ProbeResult, note: Note | None = None) -> ProbeResult:
    """Add the traced op count, activation bytes and loader time to a torch probe that lacks
    them (refines the GPU host terms); on failure keep the model's priors and say so."""
    from advisor.probes.perf.trace import TRACE_KEYS, trace_torch_step, with_trace

    if probe.framework != "torch" or all(k in probe.fingerprint for k in TRACE_KEYS):
        return probe
    try:
        trace = trace_torch_step(probe.workload, probe.batch_size)
    except Exception as exc:  # the trace only refines priors: never fail the prediction
        if note is not None:
            note(f"Note: could not trace a training step ({exc}); using priors.")
        return probe
    return with_trace(probe, trace)


def predict(
    model: str,
    batch_size: int,
    instances: str | Sequence[str] | None = None,
    *,
    machines: Sequence[InstanceType] | None = None,
    catalog: Any = None,
    snapshot: str | None = None,
    epochs: int | None = None,
    spot: bool = False,
    probe: ProbeResult | str | Path | None = None,
    threads: int | None = None,
    framework: str = "torch",
    strategy: str | None = None,
    note: Note | None = None,
    n_train: int | None = None,
    n_val: int | None = None,
    trace: bool = True,
    data_gb: float | None = None,
) -> Prediction:
    """Predict time and cost of training ``model`` (a built-in workload or your own
    ``module:function``) at ``batch_size`` on each instance.

    ``instances`` names catalog machines (or pass ``machines`` with their ``catalog``);
    ``probe`` is a ProbeResult or a saved probe file, else the probe ``advisor suggest``
    cached for it on this machine, else a probe runs here now. ``spot`` prices spot capacity
    (with the spot restart overhead, as ``advisor suggest`` does). ``n_train``/``n_val``
    override the dataset sizes (needed for a user model whose probe does not know them).
    ``trace=False`` skips tracing a training step here (a shared service predicting from an
    uploaded probe): a probe without a trace keeps the model's priors for the host terms.
    ``data_gb``: the dataset a cloud job downloads (default: a built-in workload's size
    model; a user model without it leaves the download term out).
    """
    from advisor.probes.perf.report import forecast, normalised_tables
    from advisor.search_spaces.workloads import get

    if batch_size <= 0:
        raise AdvisorError(f"--batch-size must be > 0, but got {batch_size}.", "pass e.g. 512.")
    workload = None if ModelRef(model).is_user else get(model)
    if machines is None:
        if instances is None:
            raise AdvisorError("No instances given.", "pass instances=['p3.2xlarge', ...].")
        catalog, machines = resolve_machines(instances, snapshot)
    given = load_probe(probe) if isinstance(probe, str | Path) else probe
    if given is not None and given.workload != model:
        raise AdvisorError(
            f"The probe file is for '{given.workload}', not '{model}'.",
            f"pass --model {given.workload} or another probe file.",
        )
    if given is None:
        given = cached_probe(model, batch_size, framework, threads)
        if given is not None and note is not None:
            note(f"Using the probe advisor suggest cached for {model} at batch {batch_size}.")
    if given is None:
        from advisor.probes.result import ProbeRequest
        from advisor.probes.runner import run_probe

        given = run_probe(
            ProbeRequest(
                workload=model, batch_size=batch_size, framework=framework, threads=threads
            )
        )
    if not given.ok:
        raise AdvisorError(
            f"The probe of {model} at batch {batch_size} failed ({given.status}: {given.error}).",
            "try a smaller batch size or check the workload.",
        )
    measured = traced(given, note) if trace else given
    if not epochs:
        from advisor.evaluation.workload import default_epochs

        epochs = default_epochs(workload, batch_size) if workload else USER_MODEL_EPOCHS
    if n_train is None:
        n_train = measured.n_train or (workload.n_train if workload else 0)
        if n_val is None:
            n_val = measured.n_val if measured.n_train else (workload.n_val if workload else 0)
    if n_train <= 0:
        raise AdvisorError(
            f"--model {model} is a user model and its probe does not know the dataset size.",
            "pass --n-train N (and --n-val N).",
        )
    n_val = n_val or 0
    data_bytes, data_basis = data_size(model, n_train, n_val, data_gb)
    rows = forecast(
        measured,
        machines,
        catalog,
        batch_size,
        epochs,
        n_train,
        n_val,
        spot=spot,
        strategy=strategy,
        data_bytes=data_bytes,
        data_basis=data_basis,
    )
    rows = job_priced(rows, n_train, n_val, batch_size, epochs, spot)  # issue #27
    return Prediction(
        workload=model,
        batch_size=batch_size,
        epochs=epochs,
        snapshot=getattr(catalog, "snapshot", snapshot),
        spot=spot,
        probe=measured,
        rows=rows,
        n_train=n_train,
        n_val=n_val,
        tables=normalised_tables(rows),
        notes=tuple(prediction_notes(model, measured, machines)),
    )
