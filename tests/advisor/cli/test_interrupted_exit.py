"""After Ctrl-C the CLI runs the exit handlers itself (``advisor.cli.main.run``); a logging
handler that the interrupt stopped half-way through its making must not turn logging's
exit-time flush into a traceback (seen once in CI, ``tests/e2e/test_ctrl_c.py``)."""

from __future__ import annotations

import logging

import pytest

from advisor.cli.main import drop_half_built_handlers


def _half_built() -> logging.StreamHandler:  # type: ignore[type-arg]
    """A ``StreamHandler`` stopped where Ctrl-C can stop one: registered, no stream yet."""
    half = logging.StreamHandler.__new__(logging.StreamHandler)
    logging.Handler.__init__(half)
    return half


def test_a_half_built_handler_is_dropped_and_a_whole_one_kept() -> None:
    half = _half_built()
    refs = [r for r in logging._handlerList if r() is half]  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="stream"):  # what the exit's flush would meet
        logging.shutdown(handlerList=refs)
    half, whole = _half_built(), logging.StreamHandler()
    drop_half_built_handlers()
    alive = [r() for r in logging._handlerList]  # type: ignore[attr-defined]
    assert half not in alive and whole in alive
    whole.close()
