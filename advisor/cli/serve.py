"""`advisor serve`: the advisor as an HTTP service (FastAPI + uvicorn)."""

from __future__ import annotations

from pathlib import Path

import click

from advisor.cli import params as p
from advisor.cli.params import FiniteFloat

STORAGE_HELP = (
    "Study storage URL shared by servers and workers (default: SQLite in ADVISOR_HOME); "
    "postgresql://user@host/db for a team (pip install 'advisor[postgres]'). Keep a password "
    "out of the command line (`ps` shows it): set ADVISOR_STORAGE, use --storage-file, or "
    "leave it out of the URL and set PGPASSWORD or PGPASSFILE."
)
STORAGE_FILE_HELP = (
    "A file holding the storage URL, such as a Docker or Kubernetes secret "
    "(or $ADVISOR_STORAGE_FILE)."
)


def storage_options(command: click.decorators.FC) -> click.decorators.FC:
    """--storage (or $ADVISOR_STORAGE) and --storage-file (or $ADVISOR_STORAGE_FILE), shared
    by serve, worker and token."""
    command = click.option(
        "--storage-file",
        envvar="ADVISOR_STORAGE_FILE",
        type=click.Path(dir_okay=False, path_type=Path),
        help=STORAGE_FILE_HELP,
    )(command)
    return p.storage_option(envvar="ADVISOR_STORAGE", help=STORAGE_HELP)(command)


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8765, show_default=True, help="Port to listen on.")
@storage_options
@click.option(
    "--redis",
    "redis_url",
    envvar="ADVISOR_REDIS",
    help="Redis URL of the job queue (redis://host:6379/0; or $ADVISOR_REDIS); jobs then run "
    "in `advisor worker` processes on any host. Default: in-process workers.",
)
@click.option("--workers", type=int, default=2, show_default=True, help="In-process job threads.")
@click.option(
    "--stale-after",
    type=FiniteFloat(1.0, 86400.0),
    default=None,
    help="The lease of a running job: seconds without a renewal after which it is re-queued "
    "(its worker died, was paused or lost the database). One per deployment: stored in the "
    "storage for every server and worker (kept when not given; 30 on a new storage).",
)
@click.option("--max-body", type=int, default=1_000_000, show_default=True, help="Bytes.")
@click.option(
    "--backend",
    "backend_spec",
    hidden=True,
    help="Scoring back end for tests and benchmarks: replay:TABLE.json (default: local probes).",
)
def serve(
    host: str,
    port: int,
    storage: str | None,
    storage_file: Path | None,
    redis_url: str | None,
    workers: int,
    stale_after: float | None,
    max_body: int,
    backend_spec: str | None,
) -> None:
    """Serve the advisor over HTTP: suggestions (run as jobs), studies, predict, catalog.

    Every endpoint but /health needs a token: `advisor token create NAME`.
    OpenAPI schema at /openapi.json, interactive docs at /docs.
    """
    from advisor.service.server import run_server, storage_from

    url = storage_from(storage, storage_file)
    run_server(host, port, url, redis_url, workers, stale_after, max_body, backend_spec)
