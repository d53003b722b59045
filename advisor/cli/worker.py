"""`advisor worker`: run the service's queued jobs (Redis), or join one study's trials."""

from __future__ import annotations

import json
from pathlib import Path

import click

from advisor.cli.params import FiniteFloat
from advisor.cli.serve import storage_options
from advisor.errors import AdvisorError


@click.command("worker")
@click.option(
    "--redis",
    "redis_url",
    envvar="ADVISOR_REDIS",
    help="Redis URL of the job queue (redis://host:6379/0; or $ADVISOR_REDIS).",
)
@storage_options
@click.option("--burst", is_flag=True, help="Exit when the queue is empty (tests, cron).")
@click.option(
    "--stale-after",
    type=FiniteFloat(1.0, 86400.0),
    default=None,
    help="The jobs' lease (s), stored only on a storage that has none: the deployment's "
    "stored lease (`advisor serve --stale-after`) is the one every process uses.",
)
@click.option(
    "--join",
    "join_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Instead of the queue: run trials of one study, given as a suggestion request JSON "
    "(the body of POST /v1/suggestions, with study_name). Start several, on any host.",
)
@click.option("--trials", type=int, default=50, show_default=True, help="Trials with --join.")
@click.option("--index", type=int, default=0, help="Worker number with --join (sampler seed).")
@click.option(
    "--grace",
    type=FiniteFloat(1.0, 86400.0),
    default=900.0,
    show_default=True,
    help="Seconds after which another worker's claim on a configuration counts as abandoned "
    "(its worker died), --join.",
)
@click.option(
    "--backend",
    "backend_spec",
    hidden=True,
    help="Scoring back end for tests and benchmarks: replay:TABLE.json (default: local probes).",
)
def worker(
    redis_url: str | None,
    storage: str | None,
    storage_file: Path | None,
    burst: bool,
    stale_after: float | None,
    join_file: Path | None,
    trials: int,
    index: int,
    grace: float,
    backend_spec: str | None,
) -> None:
    """Run suggestion jobs from the queue (--redis), or trials of one study (--join).

    Probes of this host run one at a time per host (only the probe waits); a killed or paused worker's job is
    re-queued once its lease expires, and resumes its study. A worker that loses Redis or the
    database waits and reconnects. SIGTERM or SIGINT: an idle worker exits at once (143 or
    130), a busy one after its job. With --join, several
    workers share the study through its storage as `advisor suggest` processes do (the same
    trial loop): no configuration is evaluated by two at once (a database-enforced claim),
    and a killed worker's claim is taken over after --grace.
    """
    from advisor.service.server import run_worker, storage_from, storage_url

    storage = storage_from(storage, storage_file)
    if join_file is not None:
        from advisor.service.schemas import SuggestRequest
        from advisor.service.trials import run_trials

        try:
            request = SuggestRequest.model_validate_json(join_file.read_text())
        except ValueError as exc:
            raise AdvisorError(
                f"{join_file} is not a suggestion request ({str(exc).splitlines()[0]}).",
                "write the JSON body of POST /v1/suggestions, with study_name.",
            ) from exc
        stats = run_trials(
            storage_url(storage),
            request.model_dump(exclude_defaults=True),
            trials,
            index,
            stale_s=grace,
            backend=backend_spec,
        )
        click.echo(json.dumps(stats.__dict__))
        return
    if not redis_url:
        raise AdvisorError("A worker needs a queue or a study.", "pass --redis URL or --join FILE.")
    run_worker(redis_url, storage, burst, backend_spec, stale_after)
