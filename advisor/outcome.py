"""What a run of the study did: ``SuggestOutcome``, the one value that the study, the cloud
probes and the report share (the report reads the rest from the study itself)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from advisor.evaluation.candidates import Candidate
from advisor.evaluation.contract import Scored
from advisor.evaluation.workload import WorkloadInfo
from advisor.options import SuggestOptions
from advisor.search_spaces.space import JointSpace

if TYPE_CHECKING:
    import optuna


class StopReason(Enum):
    """Why a run of the study stopped; the value is what the report says."""

    CONVERGED = "converged"  # no candidate left whose optimistic bound beats the best
    PROBE_BUDGET = "probe budget spent"
    TRIALS = "trials"  # --trials (or the default cap) reached
    ALL_EVALUATED = "every machine x batch size evaluated"
    ALL_FAILED = "every probe failed"
    ALL_BUSY = "every configuration proposed is failed or being evaluated by another process"
    TIMEOUT = "timeout"
    SCREEN_TIMEOUT = "timeout (during screening)"
    INTERRUPTED = "interrupted (Ctrl-C); finished trials are kept"
    TERMINATED = "terminated (SIGTERM); finished trials are kept"
    RESUMED = "resumed"  # the study had stopped on its own before: no new trials

    @property
    def final(self) -> bool:
        """Whether the search stopped on its own (a re-run of the same command adds nothing)."""
        return self not in (
            StopReason.TIMEOUT,
            StopReason.SCREEN_TIMEOUT,
            StopReason.INTERRUPTED,
            StopReason.TERMINATED,
            StopReason.RESUMED,
        )

    @property
    def interrupted(self) -> bool:
        """Stopped by Ctrl-C or SIGTERM: the report is partial (exit status 130 or 143)."""
        return self in (StopReason.INTERRUPTED, StopReason.TERMINATED)

    @property
    def timed_out(self) -> bool:
        return self in (StopReason.TIMEOUT, StopReason.SCREEN_TIMEOUT)


@dataclass(frozen=True)
class Stop:
    """A stop reason and, where it has one, its detail (the earlier stop a re-run found)."""

    reason: StopReason
    detail: str = ""

    @property
    def text(self) -> str:
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


@dataclass
class SuggestOutcome:
    """What a run of the study did (the report reads the rest from the study)."""

    study: optuna.Study
    storage_url: str
    options: SuggestOptions
    objective: str
    workload: WorkloadInfo
    space: JointSpace
    candidates: list[Candidate]
    screen: dict[tuple[str, int], Scored] = field(default_factory=dict)
    guided: bool = False
    resumed: bool = False
    new_trials: int = 0
    new_probes: int = 0
    probe_budget_usd: float = 0.0
    probe_spent_usd: float = 0.0
    stop: Stop | None = None
    wall_s: float = 0.0
    snapshot: str = ""
    # Failed local probes, one entry per status: {status, batch_sizes, reason, text}; the
    # report shows each ``text`` ("3 of 12 batch sizes ran out of memory on this machine").
    probe_failures: list[dict[str, Any]] = field(default_factory=list)
    # Issue #14, --cloud-probes: {requested, jobs (machine, batch, state, wall, billed, cost,
    # measured vs predicted step...), skipped (one line each), stop_reason, spent_usd}.
    cloud: dict[str, Any] = field(default_factory=dict)
    # Issue #27: catalog machines of the space that are no candidates, by reason ("predicted
    # only": TPUs; "previous generation": previous-generation or retired types, not asked for).
    left_out: dict[str, list[str]] = field(default_factory=dict)
    # Issue #47: the predicted-only machines (TPUs) screened at each batch size: {machine,
    # batch_size, runtime_s, cost_usd}, for the report to say where one would win.
    predicted_only: list[dict[str, Any]] = field(default_factory=list)
    # Issue #49: with --max-nodes 1, the best networked types scored on 2, 4, 8 machines (no
    # candidates; the report says when one would have been faster or cheaper)
    more_nodes: list[Scored] = field(default_factory=list)

    @property
    def stop_reason(self) -> str:
        """Why the run stopped, as the report says it."""
        return "" if self.stop is None else self.stop.text

    @property
    def cloud_probes(self) -> list[dict[str, Any]]:
        """The study's remote probe jobs (``cloud["jobs"]``; ``cloud["new"]`` of them now)."""
        return list(self.cloud.get("jobs", []))
