"""``advisor.predict``: one local probe -> predicted time and cost on machines not probed.

The Python face of ``advisor predict`` (and of the service's ``/predict``): resolve the
machines; take a saved probe, the one ``advisor suggest`` cached, or run one -- or, for a model
too big or too slow for this machine, trace it without running it (``evaluation.untimed``);
make the probe ready once (its operator trace and loader time, ``prediction.step.ready.traced``);
then the one prediction path, ``prediction.forecast.forecast.forecast`` (the same function suggest's
scorer and the service call): each machine's phases from the performance model (GPUs: the
kernel model on the operator trace) and its whole job priced by the one cost rule (issue #27:
start-up terms + training, billed once, in the rows and the per-epoch tables alike). A free
machine (this one) shows as free in the cost ratios, not as the divisor. TPU rows are marked
predicted only (advisor cannot train there), previous-generation types are marked, and a user
model whose probe did not measure its input size says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError
from advisor.evaluation.predict_notes import fewer_gpus_than, prediction_notes
from advisor.evaluation.probe_source import RunProbe, cached_probe, load_probe
from advisor.evaluation.user_code import arms_length, traced_probe
from advisor.search_spaces.workloads import ModelRef

if TYPE_CHECKING:
    from advisor.prediction.forecast.forecast import Forecast
    from advisor.probes.result import ProbeResult
    from advisor.providers.catalog import InstanceType

Note = Callable[[str], None]
# cached_probe and load_probe live in evaluation.probe_source; kept importable from here.
__all__ = ["Prediction", "cached_probe", "load_probe", "predict", "ready", "resolve_machines"]


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
    def fitting(self) -> list[Forecast]:
        """Issue #34: the rows whose step fits their devices' memory (issue #45: an unknown
        memory never fits); the others are never named fastest or cheapest."""
        return [f for f in self.rows if f.fits]

    @property
    def fastest(self) -> Forecast | None:
        """The shortest job that fits (start-up + training; rows are sorted so); None when
        no machine fits."""
        return self.fitting[0] if self.fitting else None

    @property
    def cheapest(self) -> Forecast | None:
        """The cheapest job that fits (billed start-up + training); None when none fits."""
        return min(self.fitting, key=job_cost) if self.fitting else None

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
            "fastest": self.fastest.machine.key if self.fastest else None,
            "cheapest": self.cheapest.machine.key if self.cheapest else None,
            "left_out": {
                "does not fit": [
                    f.machine.key for f in self.rows if not f.fits and not f.memory_unknown
                ],
                "memory unknown": [f.machine.key for f in self.rows if f.memory_unknown],
            },
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


def ready(
    probe: ProbeResult,
    note: Note | None = None,
    trace: Any = None,
    meta_only: bool = False,
    hyperparameters: dict[str, Any] | None = None,
) -> ProbeResult:
    """``probe`` with its operator trace and loader time (``prediction.step.ready.traced``: each
    taken once, kept when present); what could not be taken is said through ``note``."""
    out, problems = traced_probe(probe, hyperparameters, trace=trace, meta_only=meta_only)
    for problem in problems:
        if note is not None:
            note(f"Note: {problem}.")
    return out


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
    meta_only: bool = False,
    overheads: Mapping[str, Any] | None = None,
    run_probe: RunProbe | None = None,
    precision: str | None = "auto",
    plan: Any = None,
    progress: Callable[[str, int, int], None] | None = None,
    timeout_s: float | None = None,
    nodes: int = 1,
) -> Prediction:
    """Predict time and cost of training ``model`` (a built-in workload or your own
    ``module:function``) at ``batch_size`` on each instance.

    ``instances`` names catalog machines (or pass ``machines`` with their ``catalog``);
    ``probe`` is a ProbeResult or a saved probe file, else the probe ``advisor suggest``
    cached for it on this machine, else a probe runs here now (``run_probe``) -- unless the
    model is too big or too slow for this machine, which is then traced without a local
    timing. ``spot`` prices spot capacity (with the spot restart overhead, as ``advisor
    suggest`` does). ``n_train``/``n_val`` override the dataset sizes (needed for a user model
    whose probe does not know them). The probe is made ready once (its operator trace and
    loader time, when missing); ``meta_only`` takes them without running or building the model
    for real (the shared service); ``trace=False`` leaves the probe as it is (GPU rows then
    fall back on a FLOP roofline, said in their notes). ``data_gb``: the dataset a cloud job
    downloads (default: a built-in workload's size model; a user model without it leaves the
    download term out). ``overheads``: start-up terms by machine key where measured (a remote
    probe job's, ``evaluation.measured.measured_overheads``). ``precision``, ``plan``: how each
    GPU trains (issue #35, ``prediction.plan``): ``auto`` (the default) each GPU's best, bf16,
    else fp16 with loss scaling, else fp32; None the plan's own precision (fp32 without a
    plan); a GPU without the precision is left out. CPU machines train in float32 as probed.
    ``progress(phase, done, total)`` hears each machine as it is predicted (issue #50).
    ``timeout_s`` (``--timeout``, default 300): wall seconds for the probe and each call
    into a user model's code (issue #50: in the isolated worker). ``nodes`` (issue #49):
    each machine type on that many machines under torchrun; types with no cited network
    figure between machines are left out, with the reason.
    """
    from advisor.evaluation.probe_source import check_sizes, obtain_probe
    from advisor.prediction.forecast.forecast import forecast, normalised_tables
    from advisor.prediction.step.machine_plan import planned_machines
    from advisor.progress import counted
    from advisor.search_spaces.hf.ref import holds_half_base
    from advisor.search_spaces.workloads import get

    if batch_size <= 0:
        raise AdvisorError(f"--batch-size must be > 0, but got {batch_size}.", "pass e.g. 512.")
    check_sizes(n_train, n_val)  # issue #36: a probe file's bounds
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
    taken = None
    with arms_length(model, timeout_s, probe=given):  # issue #50: probe, calls into model
        if given is None:
            given, taken = obtain_probe(model, batch_size, framework, threads, note, run_probe,
                                        n_train, n_val, timeout_s)  # fmt: skip
        if not given.ok:
            raise AdvisorError(
                f"The probe of {model} at batch {batch_size} failed ({given.status}: {given.error}).",
                "try a smaller batch size or check the workload.",
            )
        measured = ready(given, note, taken, meta_only) if trace else given
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
    machines, too_many = fewer_gpus_than(machines, batch_size)  # issue #50
    half_base = holds_half_base(model)  # a fine-tune's bf16 base: bf16 alone under auto
    machines, plans, left_out = planned_machines(machines, catalog, plan, precision, half_base)
    left_out = [*too_many, *left_out]
    if nodes > 1:
        from advisor.prediction.timing.nodes import networked

        machines, unlinked = networked(machines, nodes)
        left_out += unlinked
    each = counted(machines, progress, "predict:predicting each machine")  # issue #50
    rows = forecast(measured, each, catalog, batch_size, epochs, n_train, n_val, spot=spot,
                    strategy=strategy, data_bytes=data_bytes, data_basis=data_basis,
                    overheads=overheads, plans=plans, nodes=nodes)  # fmt: skip
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
        notes=(*prediction_notes(model, measured, machines, rows), *left_out),
    )
