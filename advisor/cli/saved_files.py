"""Files a command writes besides what it prints, and the exit status of a finished command.

Outputs are written after the answer is printed, each atomically: into a temporary file in
the same folder, then renamed over the target, so a failed or interrupted write never leaves
half a file and never costs the printed answer. A write that fails is one line ("Could not
write ...: No space left on device") saying what to do, exit status 2.

Exit statuses of `advisor suggest` (docs/suggest.md): 0 finished, 2 bad input or an
environment fault (one line), 130 interrupted by Ctrl-C and 143 terminated by SIGTERM (both
after printing the partial report, when a trial had finished).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from advisor.errors import AdvisorError

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it
TERMINATED = 143  # 128 + SIGTERM
EXIT_STATUS = {"SIGINT": INTERRUPTED, "SIGTERM": TERMINATED}


RERUN = (
    "free some space or pick a writable folder, and re-run the same command (the search is "
    "stored, so it resumes at once)."
)

PRINTED_PROBE = (
    "pick a writable folder for --out; the probe printed above is what the file would hold "
    "(--json prints it as JSON)."
)


def write_atomically(
    path: Path, write: Callable[[str], object], what: str, fix: str = RERUN
) -> None:
    """Call ``write(temporary path)``, then rename the result to ``path``; any failure (disk
    full, folder gone, permission) is an ``AdvisorError`` naming ``what`` and ``path`` (and
    ``fix``), and the temporary file is removed."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=target.suffix, dir=folder)
        os.close(fd)
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # as a plain open() would create it, not 0600
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise AdvisorError(f"Could not write the {what} to {target}: {reason}.", fix) from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def write_text(path: Path, text: str, what: str, fix: str = RERUN) -> None:
    """``text`` into ``path``, atomically (see ``write_atomically``)."""
    write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"), what, fix)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
