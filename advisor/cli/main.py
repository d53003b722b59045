"""Entry point of the `advisor` command. Subcommands are imported lazily so `--help` is fast."""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any

import click

from advisor import __version__
from advisor.errors import AdvisorError, Terminated

INTERRUPTED = 130  # the exit status after Ctrl-C, as a shell reports 128 + SIGINT
TERMINATED = 143  # after SIGTERM (128 + 15), where a command turns it into Terminated

# name -> the one-line help `advisor --help` shows; ``load_command`` imports each.
COMMANDS: dict[str, str] = {
    "suggest": "Recommend machine, batch size and hyperparameters.",
    "catalog": "List, filter and refresh the priced instance catalog.",
    "probe": "Time a few real training iterations of a workload.",
    "estimate": "Extrapolate a probe to a full training run.",
    "predict": "Predict time and cost on machines not probed.",
    "workloads": "List the built-in workloads.",
    "calibration": "List what the model has learnt from measured runs; record one.",
    "submit": "Submit the managed tuning job (SageMaker, Vertex, Azure ML).",
    "status": "Show a managed tuning job's status.",
    "import": "Bring a managed tuning job's trials into a study.",
    "export": "Write the recommendation as a SkyPilot task or a managed training job.",
    "hardware": "Add, list and remove machines you own (candidates priced by their cost).",
    "dashboard": "Open optuna-dashboard on the advisor's studies.",
    "serve": "Serve the advisor over HTTP (tokens, jobs, studies).",
    "worker": "Run the service's queued jobs (Redis).",
    "token": "Create, list and revoke service tokens.",
}


def load_command(name: str) -> click.Command:
    """Import one subcommand (only the one invoked: `--help` stays fast)."""
    if name == "suggest":
        from advisor.cli.suggest import suggest as command
    elif name == "catalog":
        from advisor.cli.catalog import catalog as command
    elif name == "probe":
        from advisor.cli.probe import probe as command
    elif name == "estimate":
        from advisor.cli.estimate import estimate as command
    elif name == "predict":
        from advisor.cli.predict import predict as command
    elif name == "workloads":
        from advisor.cli.workloads import workloads as command
    elif name == "calibration":
        from advisor.cli.calibration import calibration as command
    elif name == "submit":
        from advisor.cli.submit import submit as command
    elif name == "status":
        from advisor.cli.submit import status as command
    elif name == "import":
        from advisor.cli.submit import import_job as command
    elif name == "export":
        from advisor.cli.export import export as command
    elif name == "hardware":
        from advisor.cli.hardware import hardware as command
    elif name == "dashboard":
        from advisor.cli.dashboard import dashboard as command
    elif name == "serve":
        from advisor.cli.serve import serve as command
    elif name == "worker":
        from advisor.cli.worker import worker as command
    elif name == "token":
        from advisor.cli.token import token as command
    else:
        raise KeyError(name)
    return command


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        return load_command(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = list(COMMANDS.items())
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="advisor")
def cli() -> None:
    """Tell where and how to train a model: which cloud machine, batch size and
    hyperparameters, with the time and money each choice costs.

    Start with `advisor suggest --model fcn --budget 5`.
    """


def one_line(text: str) -> str:
    """``text`` on one line: control and line-separator characters (which may come from the
    user's own input, echoed back) are written as escapes, e.g. ``\\r``."""
    return "".join(
        c.encode("unicode_escape").decode("ascii")
        if (c.isspace() and c != " ") or not c.isprintable()
        else c
        for c in text
    )


def _note(stop: BaseException | None) -> str:
    """The note an interrupt carries for the user (``advisor.study.run.RESUME_NOTE``), or ""."""
    if isinstance(stop, KeyboardInterrupt) and stop.args and isinstance(stop.args[0], str):
        return stop.args[0]
    return ""


def main(argv: list[str] | None = None) -> Any:
    """Run the CLI; user errors print one line and exit with code 2, never a traceback; so do
    faults of the study storage (a damaged or read-only file, a read-only ADVISOR_HOME)."""
    try:
        return cli.main(args=argv, prog_name="advisor", standalone_mode=False)
    except AdvisorError as exc:
        _error(exc)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:  # Ctrl-C, also outside click's
        # SIGTERM, where the command turned it into Terminated: click's own main turns any
        # KeyboardInterrupt into Abort (issue #36: "Aborted." and 130 during screening)
        stop = exc if isinstance(exc, KeyboardInterrupt) else exc.__cause__
        said = f" Stopped before the search finished; {_note(stop)}." if _note(stop) else ""
        if isinstance(stop, Terminated):
            click.echo("Terminated." + said, err=True)
            sys.exit(TERMINATED)
        click.echo("Aborted." + said, err=True)
        sys.exit(INTERRUPTED)
    except click.UsageError as exc:  # one line: what is wrong and where to read more
        command = exc.ctx.command_path if exc.ctx is not None else "advisor"
        message = one_line(" ".join(exc.format_message().split(" ")))
        click.echo(f"Error: {message} (see `{one_line(command)} --help`)", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # a storage fault met anywhere: one line that says what to do
        from advisor.storage.checks import storage_fault

        fault = storage_fault(exc)
        if fault is None:
            raise
        _error(fault)


def _error(exc: AdvisorError) -> None:
    click.echo(f"Error: {one_line(str(exc))}", err=True)
    sys.exit(2)


def run() -> Any:
    """The program's entry point (``advisor``, ``python -m advisor.cli.main``): :func:`main`,
    and after Ctrl-C the exit status 130 for certain.

    CPython 3.11 flags a KeyboardInterrupt as unhandled when it is raised inside code that
    ``exec()`` runs -- at start-up that is common: dataclasses and alembic build their methods
    with ``exec`` -- even if it is caught later, and then ends the process by SIGINT after
    finalisation (status -2 instead of 130; seen in 4 of 60 Ctrl-Cs at 0.2-0.9 s). So after
    Ctrl-C (and SIGTERM, 143): flush, run the atexit handlers, and leave without the
    interpreter's finalisation.
    """
    try:
        return main()
    except SystemExit as exc:
        if exc.code in (INTERRUPTED, TERMINATED):
            drop_half_built_handlers()
            atexit._run_exitfuncs()  # what a normal exit would run (logging, pools, children)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(int(exc.code))
        raise


def drop_half_built_handlers() -> None:
    """Forget the logging handlers a Ctrl-C interrupted while they were being made: a
    ``StreamHandler`` registers itself (``logging._handlerList``) before it sets its stream,
    and logging's exit-time flush of one without a stream prints a traceback (seen once in
    CI: Ctrl-C while a library configured its logger)."""
    import logging

    for ref in list(logging._handlerList):  # type: ignore[attr-defined]
        handler = ref()
        if isinstance(handler, logging.StreamHandler) and not hasattr(handler, "stream"):
            logging._handlerList.remove(ref)  # type: ignore[attr-defined]


if __name__ == "__main__":
    run()
