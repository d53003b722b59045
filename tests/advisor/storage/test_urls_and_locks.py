"""``advisor.storage``: where a study storage is and its lock file, the lock held against a
second opener, Ctrl-C held until a write is done, claims of exited processes, and the
storage URL checked before anything is opened."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.errors import AdvisorError
from advisor.storage.locks import (
    file_lock,
    lock_path,
    owner_gone,
    owner_id,
    sigint_deferred,
    storage_lock,
)
from advisor.storage.urls import resolve_storage


def test_each_storage_has_its_own_lock_file(tmp_path: Path, _advisor_home: Path) -> None:
    assert lock_path(f"sqlite:///{tmp_path / 'studies.db'}") == tmp_path / "studies.db.lock"
    assert lock_path("sqlite:///:memory:") is None and lock_path("sqlite:///") is None
    server = lock_path("postgresql+psycopg://advisor@db.example/studies")
    assert server is not None and server.parent == _advisor_home / "locks"
    assert server == lock_path("postgresql+psycopg://advisor@db.example/studies")
    assert server != lock_path("postgresql+psycopg://advisor@db.example/other")


def _try_lock(path: Path) -> bool:
    """Whether a second open file description gets the lock now (as another process would)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_the_lock_is_exclusive_while_held_and_free_after(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "s.lock"  # the folder is made on first use
    with file_lock(path):
        assert path.exists() and not _try_lock(path)
    assert _try_lock(path)


_HOLDER = """
import sys, time
from advisor.storage.locks import storage_lock
with storage_lock(sys.argv[1]):
    print("holding", flush=True)
    time.sleep(60)
"""


def test_a_storage_lock_is_kept_by_a_live_holder_and_passed_when_it_is_stopped(
    tmp_path: Path,
) -> None:
    """CI: a service worker stopped (SIGSTOP) while creating its storage held every other
    worker of the host for the whole pause; now only a live holder keeps the lock."""
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, url], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"holding\n"
        path = lock_path(url)
        assert path is not None and not _try_lock(path)  # held while its holder runs
        holder.send_signal(signal.SIGSTOP)
        started = time.monotonic()
        with storage_lock(url):  # goes ahead about a second after the holder stopped
            waited = time.monotonic() - started
        assert 0.9 < waited < 30, waited
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait()


def test_ctrl_c_during_a_write_is_raised_after_the_write() -> None:
    before = signal.getsignal(signal.SIGINT)
    written = []
    with pytest.raises(KeyboardInterrupt), sigint_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        written.append("the rest of the write")
    assert written == ["the rest of the write"]
    assert signal.getsignal(signal.SIGINT) is before  # the handler is restored


def test_a_claim_is_gone_only_when_its_process_on_this_host_has_exited() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert owner_gone(f"{socket.gethostname()}:{child.pid}")
    assert not owner_gone(owner_id())  # this process
    assert not owner_gone(f"another-host.example:{child.pid}")  # lapses by age instead


def test_a_storage_folder_that_does_not_exist_is_one_line_naming_the_fix(
    tmp_path: Path, _advisor_home: Path
) -> None:
    missing = tmp_path / "no-such-folder"
    with pytest.raises(AdvisorError) as err:
        resolve_storage(f"sqlite:///{missing / 'studies.db'}")
    assert str(missing) in str(err.value) and f"mkdir -p {missing}" in str(err.value)
    assert not missing.exists()
    default = resolve_storage(None)  # the default file, its folder made
    assert default == f"sqlite:///{_advisor_home / 'studies.db'}" and _advisor_home.is_dir()
