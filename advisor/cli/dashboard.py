"""`advisor dashboard`: open optuna-dashboard on the advisor's studies."""

from __future__ import annotations

import click

from advisor.cli import params as p


@click.command("dashboard")
@click.option("--storage", help="Optuna storage URL (default: the advisor's SQLite file).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=p.PORT, default=8080, show_default=True)
def dashboard(storage: str | None, host: str, port: int) -> None:
    """Serve optuna-dashboard on the studies (Ctrl-C stops it)."""
    from advisor._lazy import require
    from advisor.errors import AdvisorError
    from advisor.storage import open_storage, resolve_storage

    url = resolve_storage(storage)
    if url.startswith("sqlite:///"):
        from pathlib import Path

        if not Path(url.removeprefix("sqlite:///")).exists():
            raise AdvisorError(
                f"No study storage at {url} yet.",
                "run `advisor suggest` first, or pass --storage URL.",
            )
    storage_obj = open_storage(url)  # a bad file or server: one line here, not in the server
    dash = require("optuna_dashboard", "dashboard", "advisor dashboard")
    click.echo(f"optuna-dashboard on http://{host}:{port}/ for {url} (Ctrl-C stops it)", err=True)
    # run_server uses the standard library's wsgiref server (no gunicorn control socket).
    dash.run_server(storage_obj, host=host, port=port)
