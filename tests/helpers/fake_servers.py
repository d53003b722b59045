"""A local HTTP server that records the requests a real SDK client sends and answers JSON."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# (method, path, body) -> (status, JSON payload, or bytes sent as they are: a file download)
Responder = Callable[[str, str, Any], tuple[int, Any]]


def route(request: dict[str, Any]) -> str:
    """A recorded request's path without its query string."""
    return str(request["path"]).split("?")[0]


@contextmanager
def recording_server(
    respond: Responder, tls: ssl.SSLContext | None = None
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Serve on 127.0.0.1:<free port> (over TLS with ``tls``, a server context); yield
    (base URL, list of recorded requests)."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw.strip() else None
            seen.append(
                {"method": self.command, "path": self.path, "body": body,
                 "headers": dict(self.headers)}
            )  # fmt: skip
            status, payload = respond(self.command, self.path, body)
            raw_out = isinstance(payload, bytes)  # a file's bytes (a storage download)
            data = payload if raw_out else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header(
                "Content-Type", "application/octet-stream" if raw_out else "application/json"
            )
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class JsonServer:
    """A running ``recording_server`` for GETs: its base URL and the requests it saw."""

    url: str
    requests: list[dict[str, Any]]


@pytest.fixture
def http_server() -> Iterator[Callable[[Callable[[str, str], tuple[int, Any]]], JsonServer]]:
    """Start local servers answering GETs with ``handler(path, query) -> (status, JSON)`` (a
    price API stand-in); all are stopped after the test."""
    with ExitStack() as servers:

        def start(handler: Callable[[str, str], tuple[int, Any]]) -> JsonServer:
            def respond(_method: str, path: str, _body: Any) -> tuple[int, Any]:
                route_, _, query = path.partition("?")
                return handler(route_, query)

            return JsonServer(*servers.enter_context(recording_server(respond)))

        yield start
