"""Short managed jobs that run one probe on a cloud machine (issue #14: remote probes).

A remote probe is the same probe as a local one, run as a short managed training job on the
candidate machine: a SageMaker training job (CreateTrainingJob), a Vertex AI CustomJob or an
Azure ML command job, in the advisor's container image. This module is the provider side of
that: start such a job, wait for it, fetch the one result file the job writes, and read the
job's own wall time and billed time (what a probe really costs). It knows nothing of probes
(``providers`` sits below ``probes``): the command is data, built by the caller
(``advisor.remote.probe``), and the result file's text is handed back unparsed.

- ``ProbeJobSpec``: what to run where (machine, image, command, time limit, output location).
- ``JobPoll``: one look at the job (state, times, billed seconds when the service says).
- ``ProbeJobOutcome``: how it ended, the result file's text, wall and billed seconds, cost.
- ``ProbeJobRunner``: the base class. ``run(spec)`` = ``check`` -> ``_submit`` -> poll
  ``_poll`` until the job ends or its time limit passes (then ``_stop``) -> ``_fetch``.
  Providers fill in those hooks; the waiting, the time limit, the billing rule and the cost
  are done once, here.

The container side writes ``RESULT_FILE`` into the directory the service uploads
(``ENTRY_OUTPUT_ENV`` names, per service, the variable that holds it).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from advisor.providers.catalog import InstanceType
from advisor.providers.pricing import billing_rule, usd

from advisor.errors import AdvisorError

RESULT_FILE = "probe-result.json"

# Where each service's container finds the folder whose files come back after the job:
# SageMaker uploads SM_MODEL_DIR (/opt/ml/model) to S3 as model.tar.gz; Vertex AI sets
# AIP_MODEL_DIR to a gs:// folder, mounted at /gcs/<bucket>/... by Cloud Storage FUSE; an Azure
# ML command job gets its output folder as a command-line argument (${{outputs.result}}).
ENTRY_OUTPUT_ENV: dict[str, str] = {"sagemaker": "SM_MODEL_DIR", "vertex": "AIP_MODEL_DIR"}
# Azure ML: the job's output named "result", which the service replaces in the command by the
# folder it uploads; the command passes it to the entry as ``--out``.
AZUREML_OUTPUT = "${{outputs.result}}"


def job_command(command: tuple[str, ...], service: str) -> tuple[str, ...]:
    """``command`` as ``service``'s job runs it: on Azure ML (``azure-ml``/``azureml``) with
    ``--out ${{outputs.result}}`` appended unless it already names that output; unchanged
    elsewhere (SageMaker and Vertex AI tell the entry its folder through variables)."""
    if service in ("azure-ml", "azureml") and AZUREML_OUTPUT not in command:
        return (*command, "--out", AZUREML_OUTPUT)
    return command


JobState = Literal["pending", "running", "completed", "failed", "stopped"]
ENDED: frozenset[str] = frozenset({"completed", "failed", "stopped"})


@dataclass(frozen=True)
class ProbeJobSpec:
    """One probe job: ``command`` (argv inside ``image``) runs on ``machine`` (a catalog row;
    an EC2 / Compute Engine / Azure VM row runs on its provider's managed service, same
    hardware) for at most ``max_runtime_s``; ``output`` is where the service keeps the job's
    files (s3://..., gs://...; Azure: None, the workspace's default datastore)."""

    job_name: str
    machine: InstanceType
    image: str
    command: tuple[str, ...]
    max_runtime_s: int
    spot: bool = False
    output: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.command:
            raise ValueError("command must not be empty")
        if self.max_runtime_s <= 0:
            raise ValueError(f"max_runtime_s must be > 0, but got {self.max_runtime_s}")


@dataclass(frozen=True)
class JobPoll:
    """One look at a job. Times are unix seconds as the service reports them: ``created_at``
    (accepted), ``started_at`` (training started on the machine), ``ended_at``. ``billed_s``
    is the service's own billed seconds where it reports them (SageMaker's
    ``BillableTimeInSeconds``), with ``billed_source`` naming the field."""

    state: JobState
    created_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    billed_s: float | None = None
    billed_source: str = ""
    message: str | None = None


@dataclass(frozen=True)
class ProbeJobOutcome:
    """How a probe job ended and what it cost. ``state`` is a ``JobState`` or ``"timeout"``
    (stopped by us after ``max_runtime_s`` plus the start-up allowance); ``result_text`` is
    the result file's text (None when the job wrote none); ``wall_s`` runs from submission to
    the end; ``billed_s`` is what the bill counts, read out (``billed_source`` names the field)
    or computed from the service's times with its billing rule. Issue #27: the job's own
    start-up is kept: ``before_start_s`` from acceptance to the job starting on the machine
    (provisioning), ``on_machine_s`` from that start to the end (None when the service did
    not say)."""

    job_id: str
    service: str
    state: str
    result_text: str | None
    wall_s: float
    billed_s: float
    billed_source: str
    price_per_hour: float
    error: str | None = None
    before_start_s: float | None = None
    on_machine_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.state == "completed" and self.result_text is not None

    @property
    def cost_usd(self) -> float:
        """What the probe cost: billed seconds at the machine's price (on demand or spot)."""
        return usd(self.billed_s, self.price_per_hour)

    def to_dict(self) -> dict[str, object]:
        return {
            "job_id": self.job_id,
            "service": self.service,
            "state": self.state,
            "wall_s": self.wall_s,
            "billed_s": self.billed_s,
            "billed_source": self.billed_source,
            "price_per_hour": self.price_per_hour,
            "cost_usd": self.cost_usd,
            "error": self.error,
            "before_start_s": self.before_start_s,
            "on_machine_s": self.on_machine_s,
        }


StatusHook = Callable[[str, JobPoll], None]  # (job id, poll) -> None: progress for the caller


class ProbeJobRunner(ABC):
    """Runs probe jobs on one cloud's managed training service.

    Subclasses set ``name`` (the managed service: "sagemaker", "vertex", "azure-ml", "local")
    and ``providers`` (catalog providers whose machines it can run), and fill in ``check``
    (credentials and settings present, else one-line ``AdvisorError``), ``_submit``,
    ``_poll``, ``_fetch`` and ``_stop``.
    """

    name: ClassVar[str] = "base"
    providers: ClassVar[tuple[str, ...]] = ()
    # Allowance for provisioning and image pull on top of the job's own time limit before we
    # give up waiting (a prior, like providers/overheads.py's start-up figures).
    START_ALLOWANCE_S: ClassVar[float] = 1200.0

    def __init__(self, poll_s: float = 15.0, clock: Callable[[], float] = time.time) -> None:
        self.poll_s = poll_s
        self._clock = clock

    @property
    def layout(self) -> str:
        """The managed service whose container conventions the job runs under (its output
        folder variables, ``job_command``): the runner's own service; the local emulation
        says which one it emulates."""
        return self.name

    def can_run(self, machine: InstanceType) -> bool:
        return machine.provider in self.providers

    @abstractmethod
    def check(self) -> None:
        """Raise a one-line ``AdvisorError`` when jobs cannot be started (no credentials, no
        role/bucket/workspace); return quietly when they can."""

    def run(self, spec: ProbeJobSpec, on_status: StatusHook | None = None) -> ProbeJobOutcome:
        """Submit the job, wait for it to end (stopping it past its time limit), fetch its
        result file, and price it with the machine's billing rule."""
        if not self.can_run(spec.machine):
            raise AdvisorError(
                f"{self.name} probe jobs cannot run on {spec.machine.key}.",
                f"use a machine of {', '.join(self.providers) or 'no provider'}.",
            )
        self.check()
        submitted = self._clock()
        job_id = self._submit(spec)
        deadline = submitted + spec.max_runtime_s + self.START_ALLOWANCE_S
        poll = self._poll(job_id)
        while poll.state not in ENDED:
            if on_status is not None:
                on_status(job_id, poll)
            if self._clock() > deadline:
                self._stop(job_id)
                waited = f"no end after {deadline - submitted:.0f} s: stopped"
                return self._outcome(spec, job_id, poll, submitted, "timeout", None, waited)
            self._sleep(self.poll_s)
            poll = self._poll(job_id)
        if on_status is not None:
            on_status(job_id, poll)
        text = self._fetch(job_id, spec) if poll.state == "completed" else None
        error = None
        if poll.state != "completed":
            error = poll.message or f"job {poll.state}"
        elif text is None:
            error = "the job completed but wrote no result file"
        return self._outcome(spec, job_id, poll, submitted, poll.state, text, error)

    def _outcome(
        self,
        spec: ProbeJobSpec,
        job_id: str,
        poll: JobPoll,
        submitted: float,
        state: str,
        text: str | None,
        error: str | None,
    ) -> ProbeJobOutcome:
        end = poll.ended_at if poll.ended_at is not None else self._clock()
        start = poll.created_at if poll.created_at is not None else submitted
        wall = max(0.0, end - start)
        rule = billing_rule(spec.machine.service if self.name == "local" else self.name)
        if poll.billed_s is not None:
            billed, source = float(poll.billed_s), poll.billed_source
        elif poll.started_at is not None:
            billed = rule.billed(max(0.0, end - poll.started_at))
            source = f"end - start of training on the machine, billed per {rule.source}"
        else:  # never started on a machine: nothing billed
            billed, source = 0.0, "the job never started on a machine"
        price = spec.machine.price(spec.spot)
        before = on_machine = None
        if poll.started_at is not None:  # issue #27: the measured start-up is kept
            before = max(0.0, poll.started_at - start)
            on_machine = max(0.0, end - poll.started_at)
        source = self._billing_note(spec, source)
        return ProbeJobOutcome(
            job_id, self.name, state, text, wall, billed, source, price, error, before, on_machine
        )

    def _billing_note(self, spec: ProbeJobSpec, source: str) -> str:
        """What the outcome says about its billed time, given where the time came from."""
        return source

    def _sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    @abstractmethod
    def _submit(self, spec: ProbeJobSpec) -> str:
        """Start the job; return its id (name or resource name)."""

    @abstractmethod
    def _poll(self, job_id: str) -> JobPoll:
        """The job's state and times now."""

    @abstractmethod
    def _fetch(self, job_id: str, spec: ProbeJobSpec) -> str | None:
        """The text of the job's ``RESULT_FILE``, or None when it wrote none."""

    @abstractmethod
    def _stop(self, job_id: str) -> None:
        """Stop a job that ran past its limit (best effort)."""
