"""Remote probes as ``advisor suggest --cloud-probes`` starts them: the prober's contract and
the default one, which runs each probe through ``advisor.remote.probe`` with the cloud settings
of the options."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError

if TYPE_CHECKING:
    from advisor.outcome import SuggestOutcome
    from advisor.probes.result import ProbeResult
    from advisor.providers.catalog import InstanceType

Status = Callable[[str], None]
# (machine, batch, local probe of that batch, status hook) -> advisor.remote.probe.RemoteProbe
Prober = Callable[["InstanceType", int, "ProbeResult", Status], Any]


class ProviderUnavailable(AdvisorError):
    """Probe jobs cannot be started on a provider (not configured, no credentials): the
    step says so in one line and carries on without that provider's machines."""


def default_prober(outcome: SuggestOutcome, backend: Any) -> Prober:
    """Remote probes through ``advisor.remote.probe`` with the cloud settings of the options
    (a path, a ``CloudSettings``, or ``$ADVISOR_HOME/cloud.yaml``); the local emulation for
    every provider when ``emulate_cloud``."""
    from advisor.remote.probe import remote_probe, runner_for
    from advisor.remote.settings import provider_of

    options = outcome.options
    settings = load_settings(options.cloud_settings)
    # The study storage's URL: the remote probe is cached there and recorded in its ledger,
    # which the model reads (a storage object of a test: the back end's ledger URL).
    url = outcome.storage_url
    storage = url if "://" in url else backend.ledger_storage

    def probe(machine: InstanceType, batch: int, local: ProbeResult, status: Status) -> Any:
        try:  # settings and credentials first: a provider that cannot start jobs is one line
            runner = runner_for(machine, settings, emulate=options.emulate_cloud)
            runner.check()
            if not options.emulate_cloud:  # the job's image (the emulation runs this Python)
                settings.image_for(provider_of(machine.service) or "")
        except AdvisorError as exc:
            raise ProviderUnavailable(exc.problem, exc.fix) from exc
        return remote_probe(
            outcome.workload,
            machine,
            batch,
            storage=storage,
            settings=settings,
            runner=runner,
            iterations=backend.iterations,
            max_probe_s=backend.max_probe_s,
            local_probe=local,
            catalog=backend.catalog,
            on_status=status,
        )

    return probe


def load_settings(value: Any) -> Any:
    """``CloudSettings`` from a path (or the default file when None); an object as is."""
    from pathlib import Path

    from advisor.remote.settings import CloudSettings

    if isinstance(value, CloudSettings):
        return value
    if value is not None and not Path(value).is_file():
        raise AdvisorError(
            f"The cloud settings file {value} does not exist.",
            "pass --cloud-config with an existing cloud.yaml, or leave it out for "
            "$ADVISOR_HOME/cloud.yaml.",
        )
    return CloudSettings.load(None if value is None else Path(value))
