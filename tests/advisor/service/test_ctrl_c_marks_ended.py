"""A Ctrl-C held while a process writes its presence mark (``peer:<owner>``, the first write
of a trial loop) still ends with the mark marked ended: other processes then stop re-reading
the trials for it. CI caught it once: ``tests/e2e/test_ctrl_c.py`` at the moment the study
appears (the deferred KeyboardInterrupt was raised before the loop's ``try``)."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from advisor.service import api, trials

REQUEST = {"model": "fcn", "budget_usd": 50, "study_name": "marks", "sampler": "random"}


def test_ctrl_c_during_the_first_presence_mark_still_marks_the_process_ended(
    sqlite_url: str, replay: str
) -> None:
    marks: list[bool] = []

    def interrupting(storage: Any, study: Any) -> trials.TableClaims:
        store = trials.TableClaims(sqlite_url, storage, study, 60.0)
        real_hello = store.hello

        def hello(ended: bool = False) -> None:
            real_hello(ended)
            marks.append(ended)
            if len(marks) == 1:  # Ctrl-C while the first mark is written (held, then raised)
                os.kill(os.getpid(), signal.SIGINT)

        store.hello = hello  # type: ignore[method-assign]
        return store

    api.prepare_storage(sqlite_url)
    request = {**REQUEST, "screen": False, "trials": 3}
    with pytest.raises(KeyboardInterrupt):
        api.join_study(request, sqlite_url, interrupting, backend=replay)
    assert marks == [False, True]
