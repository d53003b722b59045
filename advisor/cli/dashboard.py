"""`advisor dashboard`: open optuna-dashboard on the advisor's studies."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import click

from advisor.cli import params as p
from advisor.errors import AdvisorError

if TYPE_CHECKING:
    from advisor.report.dashboard import DashboardView


@click.command("dashboard")
@p.storage_option()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=p.PORT, default=8080, show_default=True)
def dashboard(storage: str | None, host: str, port: int) -> None:
    """Serve optuna-dashboard on the studies (Ctrl-C stops it). Each trial shows short,
    sortable attributes (machine, GPUs, capacity, batch, run time, cost, how it was obtained,
    price and its date) and its full detail as the trial's note; the probe cache is hidden."""
    import socket

    from advisor._lazy import require
    from advisor.storage.urls import resolve_storage

    url = resolve_storage(storage)
    if url.startswith("sqlite:///"):
        from pathlib import Path

        if not Path(url.removeprefix("sqlite:///")).exists():
            raise AdvisorError(
                f"No study storage at {url} yet.",
                "run `advisor suggest` first, or pass --storage URL.",
            )
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            raise bind_error(host, port, exc) from None
    view = _view(url)  # a bad file or server: one line here, before optuna-dashboard loads
    dash = require("optuna_dashboard", "dashboard", "advisor dashboard")
    from wsgiref.simple_server import make_server

    from advisor.report.dashboard import with_detail_pages

    app = with_detail_pages(dash.wsgi(view), view.base)
    from sqlalchemy.engine import make_url  # issue #17: never print a database password

    shown = make_url(url).render_as_string(hide_password=True)
    click.echo(f"optuna-dashboard on http://{host}:{port}/ for {shown} (Ctrl-C stops it)", err=True)
    # The standard library's wsgiref server, as optuna-dashboard's run_server uses.
    with make_server(host, port, app) as server, contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


def bind_error(host: str, port: int, exc: OSError) -> AdvisorError:
    """Why serving on host:port failed, with the fix that matches: a host that is no address
    of this machine (or no address at all) needs another --host; a port below 1024 or in use
    another --port."""
    import errno
    import socket

    reason = exc.strerror or str(exc)
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return AdvisorError(
            f"Cannot serve on {host}:{port}: {reason} ('{host}' is not an address of this "
            "machine).",
            "pass --host 127.0.0.1 (this machine only) or --host 0.0.0.0 (every interface).",
        )
    if exc.errno == errno.EACCES and port < 1024:
        return AdvisorError(
            f"Cannot serve on {host}:{port}: {reason} (ports below 1024 need privileges).",
            "pass --port 8080 (or another port above 1023).",
        )
    return AdvisorError(
        f"Cannot serve on {host}:{port}: {reason}.",
        f"pass another --port (e.g. --port {port + 1}) or stop what uses {port}.",
    )


def _view(url: str) -> DashboardView:
    """The storage behind ``url``, wrapped for the dashboard (advisor.report.dashboard)."""
    import optuna

    from advisor.errors import AdvisorError
    from advisor.report.dashboard import DashboardView
    from advisor.storage.checks import storage_errors

    try:
        with storage_errors(url):
            base = optuna.storages.RDBStorage(url, skip_compatibility_check=False)
    except ImportError as exc:  # optuna re-raises the driver's ModuleNotFoundError
        cause = exc if isinstance(exc, ModuleNotFoundError) else exc.__cause__
        driver = getattr(cause, "name", None) or "database"
        raise AdvisorError(
            f"The storage {url.split('://')[0]}:// needs the '{driver}' driver, which is not "
            "installed.",
            "pip install 'advisor[postgres]' (psycopg), or use a sqlite:/// path.",
        ) from None
    return DashboardView(base)
