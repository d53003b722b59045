"""Score one candidate (machine, batch size, hyperparameters): time, cost, and how we know.

A back end turns a candidate into an ``Evaluation``. The base class ``Backend`` does the
bookkeeping once (candidate list with spot variants, prices, spot restart overhead, counting
new probes); subclasses fill in a few private hooks:

- ``LocalBackend``: real probes on this machine (``advisor.probes.runner.run_probe``, cached in
  the study storage), measured phases for the local machine, the performance model
  (``advisor.prediction.timing.model.predict_phases``) for catalog machines, and the
  iteration-time model (``advisor.prediction.run.iteration_model.estimate``) for the run.
- ``advisor.evaluation.replay.ReplayBackend``: serves a fixed recorded table; used by tests and the
  search-efficiency benchmark exactly the way the real back end is used.

Iteration time depends on (workload, batch size, hardware), not on the learning rate or
dropout: probes are cached by that key (plus hyperparameters flagged ``affects_runtime``).

Prices: ``Backend._finish`` prices every run through the one pricing path
(``advisor.providers.pricing``: list price on demand or spot, the spot restart overhead, the
start-up overheads of the machine's service (``advisor.providers.overheads``, issue #14), the
service's billing rule), the same path ``advisor predict`` and the report use. An
``Evaluation``'s runtime and cost are the whole job's (start-up + training): what the user
waits for and pays, and what the budget and deadline judge; the terms are in its
``estimate["overheads"]``.

Probe charges (issue #27): only what ran on a billed machine is charged to the probe budget.
``Backend.probes_run_on_candidates`` says whether scoring a candidate runs a probe on that
machine: False for ``LocalBackend`` (it probes this machine, free, and models the rest; the
remote probes of ``--cloud-probes`` are charged by that step at their billed time), True for
the replay back end (each replayed row stands for a probe run there). A scored candidate's
``probe_cost_usd`` is that charge: 0 for a modelled run.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from advisor.errors import AdvisorError
from advisor.evaluation.candidates import Candidate, offered, predicted_only
from advisor.evaluation.space_checks import check_instance_types
from advisor.evaluation.workload import WorkloadInfo
from advisor.intervals import Interval
from advisor.probes.result import PhaseTimes, ProbeResult
from advisor.providers.catalog import InstanceType
from advisor.search_spaces.space import JointSpace, MachineFilter


@dataclass(frozen=True)
class RunTime:
    """What a back end's hook returns: the on-demand run time of one (machine, batch)."""

    runtime: Interval | None  # seconds; None when failed
    source: str  # "measured" | "modelled" | "replayed"
    epochs: int
    probe_s: float  # predicted duration of a probe on this machine (for the probe budget)
    estimate: dict[str, Any] = field(default_factory=dict)
    phases: PhaseTimes | None = None
    probe: ProbeResult | None = None
    new_probe: bool = False
    error: str | None = None
    # Issue #27: the start-up terms to price the run with, when measured (a remote probe job's
    # own start-up); None: the service's priors (providers/overheads.py).
    overheads: Any = None


@dataclass(frozen=True, kw_only=True)
class _Scored:
    """What every scored candidate says: which one, how it is known, what its probe costs."""

    machine: str  # candidate key (with :spot)
    batch_size: int
    source: str
    epochs: int
    price_per_hour: float
    spot: bool
    probe_s: float
    estimate: dict[str, Any] = field(default_factory=dict)
    phases: PhaseTimes | None = None
    probe: ProbeResult | None = None
    new_probe: bool = False
    # Issue #27: USD a trial of this candidate charges to the probe budget: a probe run on that
    # machine for it, at its price (the replay back end); 0 when none runs there (this
    # machine's probe, a modelled run, a remote probe already charged by --cloud-probes).
    probe_cost_usd: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.probe_cost_usd < float("inf"):
            raise ValueError(f"probe_cost_usd must be >= 0, got {self.probe_cost_usd}")


@dataclass(frozen=True, kw_only=True)
class Evaluation(_Scored):
    """A scored candidate: run time and cost with intervals, and where they come from."""

    runtime: Interval
    cost: Interval
    status: ClassVar[Literal["ok"]] = "ok"
    ok: ClassVar[bool] = True
    error: ClassVar[None] = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.runtime, Interval) and isinstance(self.cost, Interval)):
            raise ValueError(
                f"{self.machine} b{self.batch_size}: an evaluation has a runtime and a cost "
                f"(a failed one is a FailedEvaluation), but got runtime={self.runtime!r}, "
                f"cost={self.cost!r}"
            )


@dataclass(frozen=True, kw_only=True)
class FailedEvaluation(_Scored):
    """A candidate that could not be scored (its probe failed), and why."""

    error: str
    status: ClassVar[Literal["failed"]] = "failed"
    ok: ClassVar[bool] = False


# What a back end returns for a candidate: ``isinstance(ev, Evaluation)`` tells them apart.
Scored = Evaluation | FailedEvaluation


def probe_duration_s(phases: PhaseTimes, iterations: int) -> float:
    """How long a probe of ``iterations`` steps and two validation passes takes there."""
    return (
        phases.init.value
        + phases.t1.value
        + max(iterations - 1, 0) * phases.t2.value
        + phases.v1.value
        + phases.v2.value
    )


@dataclass(frozen=True)
class RunSettings:
    """What one search tells its back end, once, before it starts (``Backend.configure``;
    ``advisor.study.run.run_suggest`` makes it from the options). ``deadline``: ``clock()``
    by which the search must end (--timeout; a back end that runs probes shortens their
    time-outs to it); ``clock``: the search's clock (a replay back end's may be simulated);
    ``precision`` and ``plan_fields``: --precision and --plan's fixed fields (issue #35),
    honoured by a back end that predicts under training plans (``plans``), refused by one
    that cannot; ``before_probes``: called once before the first probe is timed (issue
    #36's first answer)."""

    deadline: float | None = None
    clock: Callable[[], float] = time.monotonic
    precision: str = "auto"
    plan_fields: Mapping[str, Any] = field(default_factory=dict)
    before_probes: Callable[[], None] | None = None


class Backend(ABC):
    """Turns (candidate, batch size, hyperparameters) into an ``Evaluation``.

    Contract: the study calls ``candidates`` once, then ``screen`` (cheap, optional: None when
    the back end cannot predict without probing) and ``evaluate`` for each trial, from one
    thread. Public methods do the bookkeeping (spot variants, prices, spot overhead, counting
    new probes); subclasses implement ``_instances``, ``_runtime`` and optionally ``_screen``.
    """

    name = "base"
    # Issue #27: whether scoring a candidate runs a (billed) probe on that machine; False: the
    # back end probes this machine only and models the others, so its trials charge nothing.
    probes_run_on_candidates: ClassVar[bool] = False
    # Whether a trial gives exactly its screen's values (same cached probe, same model) when
    # no hyperparameter changes the run time: the planner then knows a trial's result
    # beforehand and stops once nothing left can rank above the best (advisor.study.planner).
    trials_repeat_screen: ClassVar[bool] = False
    # Whether its predictions follow a training plan (--precision, --plan: issue #35).
    plans: ClassVar[bool] = False
    # Issue #49: whether ``_runtime`` and ``_screen`` take a node count (a fifth argument):
    # only then are several machines of a type candidates (``--max-nodes``).
    models_nodes: ClassVar[bool] = False

    def __init__(self) -> None:
        self.new_probes = 0
        self.evaluations = 0
        # Issue #27: machine keys the last ``candidates`` call left out, by reason.
        self.left_out: dict[str, list[str]] = {}
        # Issue #47: the predicted-only machines (TPUs) of the last ``candidates`` call, on
        # demand: screened after the search so the report can say where one would win.
        self.predicted_only: list[Candidate] = []
        # The search's settings (``configure``); ``deadline`` and ``clock`` read from them.
        self.settings = RunSettings()
        self.deadline: float | None = None
        self.clock: Callable[[], float] = time.monotonic
        # The last ``_screen`` call's machine, batch and hyperparameters, and its run time: a
        # spot candidate follows its on-demand twin (``candidates``), the same machine.
        self._last_screen: tuple[tuple[Any, ...], RunTime] | None = None

    def configure(self, settings: RunSettings) -> None:
        """Take the search's ``settings`` (before ``candidates``). A back end that does not
        predict under training plans refuses a --precision or --plan it would ignore."""
        if not self.plans and (settings.plan_fields or settings.precision not in ("auto", "fp32")):
            raise AdvisorError(
                f"The {self.name} back end does not predict under training plans "
                "(--precision, --plan).",
                "drop --precision and --plan, or use the local back end.",
            )
        self.settings = settings
        self.deadline, self.clock = settings.deadline, settings.clock

    @property
    def snapshot(self) -> str:
        """The catalog snapshot (or table id) whose prices this back end uses."""
        return "unknown"

    def candidates(
        self, space: JointSpace, include_previous_generation: bool = False, max_nodes: int = 1
    ) -> list[Candidate]:
        """Machines of the space, each on demand and (when allowed and sold) on spot. Issue
        #27: machines advisor cannot train on (TPUs) are never candidates, and previous-
        generation or retired types only when asked for (or named in the space). Issue #49:
        with ``max_nodes`` > 1, a back end that models several machines (``models_nodes``)
        adds each GPU type with a cited network figure on 2, 4, 8... machines."""
        catalog = getattr(self, "catalog", None)  # native spellings resolve (issue #15)
        check_instance_types(
            space.machines.instance_types,
            self._instances(MachineFilter()),
            getattr(catalog, "matching_keys", None),
        )
        named = set(space.machines.instance_types)  # asked for by name: offered whatever its age
        if named and catalog is not None and hasattr(catalog, "matching_keys"):
            named |= set(catalog.matching_keys(tuple(named)))
        out: list[Candidate] = []
        self.left_out = {"predicted only": [], "previous generation": []}
        self.predicted_only = []
        for inst in self._instances(space.machines):
            if not offered(inst, include_previous_generation, named):
                why = "predicted only" if predicted_only(inst) else "previous generation"
                self.left_out[why].append(inst.key)
                if why == "predicted only":
                    self.predicted_only.append(Candidate(inst))
                continue
            local = inst.provider == "local"
            if space.machines.on_demand or local:  # issue #28: --spot leaves on demand out
                out.append(Candidate(inst))
            if space.machines.spot and inst.spot_usd_per_h is not None and not local:
                out.append(Candidate(inst, spot=True))
        if max_nodes > 1 and self.models_nodes:
            out += self._on_nodes(out, max_nodes)
        return out

    def _on_nodes(self, one: list[Candidate], max_nodes: int) -> list[Candidate]:
        """Issue #49: the one-machine candidates ``one`` on 2, 4, 8... <= ``max_nodes``
        machines, for the types with a cited network figure (the rest named in ``left_out``)."""
        from advisor.evaluation.candidates import node_counts
        from advisor.prediction.timing.nodes import networked

        keep, _ = networked([c.instance for c in one if not c.local], max_nodes)
        joined = {i.key for i in keep}
        single = sorted({c.instance.key for c in one if not c.local} - joined)
        self.left_out["one machine only (no cited network figure)"] = single
        return [
            replace(c, nodes=n)
            for n in node_counts(max_nodes)[1:]
            for c in one
            if c.instance.key in joined
        ]

    def evaluate(
        self, workload: WorkloadInfo, candidate: Candidate, batch_size: int, hps: dict[str, Any]
    ) -> Scored:
        """Score a candidate (may run a probe); failures come back as ``FailedEvaluation``."""
        rt = self._runtime(workload, candidate.instance, batch_size, hps, *_nodes(candidate))
        self.evaluations += 1
        self.new_probes += int(rt.new_probe)
        return self._finish(candidate, batch_size, rt, workload)

    def screen(
        self,
        workload: WorkloadInfo,
        candidate: Candidate,
        batch_size: int,
        hps: dict[str, Any],
        mode: str = "search",
        outpaced: Callable[[Interval], bool] | None = None,
    ) -> Scored | None:
        """A cheap prediction used to order the search, or None if unavailable. A spot
        candidate screened right after its on-demand twin takes the twin's run time (the same
        machine, batch and hyperparameters: only the price and the spot terms differ, in
        ``_finish``), so the model runs once per machine, not once per offer. ``mode``, for a
        back end whose predictions follow a training plan (``plans``; the others predict one
        way): "search" the fastest plan that fits, "plain" the plain plans alone, "bound" the
        fastest plan its memory untraced (``plan_search.best_forecast``; the screen's two
        passes, ``advisor.study.screen``); ``outpaced``: where the search may stop
        (``best_forecast``'s), for such a back end."""
        key = (id(workload), candidate.instance.key, candidate.nodes, batch_size,
               repr(sorted(hps.items())), mode)  # fmt: skip
        if candidate.spot and self._last_screen is not None and self._last_screen[0] == key:
            rt: RunTime | None = replace(self._last_screen[1], new_probe=False)
        else:
            kw: dict[str, Any] = {"mode": mode} if self.plans and mode != "search" else {}
            if self.plans and outpaced is not None:
                kw["outpaced"] = outpaced
            rt = self._screen(workload, candidate.instance, batch_size, hps, *_nodes(candidate),
                              **kw)  # fmt: skip
            self._last_screen = None if rt is None else (key, rt)
        if rt is None:
            return None
        self.new_probes += int(rt.new_probe)
        return self._finish(candidate, batch_size, rt, workload)

    def priced(
        self, candidate: Candidate, batch_size: int, training: Interval, epochs: int,
        workload: WorkloadInfo | None = None,
    ) -> Scored:  # fmt: skip
        """A modelled run of ``training`` seconds on demand, priced for ``candidate`` as its
        rows are (``_finish``: start-up, spot terms, nodes)."""
        return self._finish(candidate, batch_size, RunTime(training, "modelled", epochs, 0.0),
                            workload)  # fmt: skip

    def _finish(
        self,
        candidate: Candidate,
        batch_size: int,
        rt: RunTime,
        workload: WorkloadInfo | None = None,
    ) -> Scored:
        """Price the run (the job: start-up overheads + training; issue #14)."""
        from advisor.prediction.run.iteration_model import priced
        from advisor.providers.overheads import run_overheads
        from advisor.providers.pricing import usd

        charged = self.probes_run_on_candidates and not candidate.local
        common: dict[str, Any] = {
            "probe_cost_usd": usd(rt.probe_s, candidate.price_per_hour) if charged else 0.0,
            "machine": candidate.key,
            "batch_size": batch_size,
            "source": rt.source,
            "epochs": rt.epochs,
            "price_per_hour": candidate.price_per_hour,
            "spot": candidate.spot,
            "probe_s": rt.probe_s,
            "phases": rt.phases,
            "probe": rt.probe,
            "new_probe": rt.new_probe,
        }
        if rt.runtime is None:
            error = rt.error or "probe failed"
            return FailedEvaluation(estimate=dict(rt.estimate), error=error, **common)
        data = (workload.data_bytes, workload.data_basis) if workload else (0.0, "")
        from advisor.prediction.timing import nodes as many  # issue #49: N machines

        n, train = candidate.nodes, rt.runtime
        runtime, cost, notes = priced(
            many.spot_training(train, n) if candidate.spot else train,
            candidate.price_per_hour,
            spot=candidate.spot,
            service=candidate.instance.service,
            overheads=many.cluster_overheads(
                rt.overheads or run_overheads(candidate.instance, *data), n
            ),
        )
        return Evaluation(runtime=runtime, cost=cost, estimate={**rt.estimate, **notes}, **common)

    @abstractmethod
    def _instances(self, machines: MachineFilter) -> Sequence[InstanceType]:
        """The instance types matching the filter."""

    @abstractmethod
    def _runtime(
        self, workload: WorkloadInfo, instance: InstanceType, batch_size: int, hps: dict[str, Any]
    ) -> RunTime:
        """The on-demand run time of one (machine, batch); never raises for probe failures."""

    def _screen(
        self, workload: WorkloadInfo, instance: InstanceType, batch_size: int, hps: dict[str, Any]
    ) -> RunTime | None:
        return None


def _nodes(candidate: Candidate) -> tuple[int, ...]:
    """The node count passed to a back end's hooks: none for one machine (hooks written
    before issue #49 take four arguments), ``(N,)`` for N machines."""
    return (candidate.nodes,) if candidate.nodes > 1 else ()
