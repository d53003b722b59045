"""``advisor ARGS`` run in this process, its exit code and output captured."""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass

from advisor.cli.main import main

# A SageMaker submit that only writes its request (--dry-run): cheap, and valid as it stands.
SUBMIT_DRY_RUN = (
    "submit",
    "--provider",
    "sagemaker",
    "--dry-run",
    "--instance",
    "ml.p3.2xlarge",
    "--model",
    "fcn",
)


_PROGRESS = re.compile(r"\[\d+:\d\d\] ")


def error_lines(err: str) -> list[str]:
    """stderr's non-blank lines without the progress lines ("[0:10] ...") that long work
    prints (issue #50): what remains of a refused command is its one "Error: ..." line."""
    return [line for line in err.splitlines() if line.strip() and not _PROGRESS.match(line)]


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def run(*args: str) -> Outcome:
    """``advisor ARGS`` in this process, stdout and stderr captured; a traceback escapes."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return Outcome(code, out.getvalue(), err.getvalue())
