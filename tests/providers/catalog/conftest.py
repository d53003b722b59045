"""Catalog test helpers: user snapshots under the per-test ADVISOR_HOME, a local HTTP server."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from advisor.providers.catalog._store import DATA_DIR

from advisor.config import user_catalog_dir

FIXTURES = Path(__file__).parent / "fixtures"

Handler = Callable[[str, str], tuple[int, Any]]  # (path, query) -> (status, JSON body)


@pytest.fixture
def copy_snapshot() -> Callable[[str, str], Path]:
    """Copy a shipped snapshot into the user catalog folder under a new name."""

    def copy(source: str, name: str) -> Path:
        target = user_catalog_dir() / name
        shutil.copytree(DATA_DIR / source, target, ignore=shutil.ignore_patterns("__*"))
        return target

    return copy


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (to show that nothing changed)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


class _Server:
    def __init__(self, handler: Handler) -> None:
        self.requests: list[str] = []
        outer = self

        class _H(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests.append(self.path)
                path, _, query = self.path.partition("?")
                status, body = handler(path, query)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def http_server() -> Iterator[Callable[[Handler], _Server]]:
    """Start local HTTP servers answering with a handler; all are stopped after the test."""
    servers: list[_Server] = []

    def start(handler: Handler) -> _Server:
        server = _Server(handler)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()
