"""Python client of ``advisor serve`` (httpx): the same requests ``advisor suggest`` makes.

from advisor.service.client import Client
report = Client("http://advisor:8765", token).suggest({"model": "fcn", "budget_usd": 5})

Transient failures are retried with backoff (honouring ``Retry-After``) for up to
``retry_s`` seconds per call: 502, 503 and 504 (the service's storage or queue is down, a
proxy in front of a restarting server), and a connection refused, reset or dropped (the
server restarting). Until the server has answered once, a connection that fails is retried
for ``FIRST_CONTACT_S`` only (a wrong ``--server`` fails fast). Every request is safe to
repeat: reads change nothing, and a suggestion sent again while its job is queued or running
returns that job.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from advisor.errors import AdvisorError
from advisor.service.outages import backoff

TOKEN_ENV = "ADVISOR_TOKEN"
RETRY_S = 300.0  # the default time limit of one call's retries
FIRST_CONTACT_S = 10.0  # the limit for connection errors before the server ever answered
TRANSIENT_STATUS = (502, 503, 504)


class Client:
    """Talks to one advisor service; errors come back as one-line ``AdvisorError``."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout_s: float = 30.0,
        retry_s: float = RETRY_S,
        on_retry: Callable[[str, float], None] | None = None,
    ) -> None:
        import httpx

        token = token or os.environ.get(TOKEN_ENV)
        if not token:
            raise AdvisorError(
                "The service needs a token.",
                f"ask its admin for one (advisor token create NAME) and set {TOKEN_ENV}.",
            )
        self.url = url.rstrip("/")
        self.retry_s = retry_s
        self.answered = False  # whether the server has answered this client yet
        self.on_retry = on_retry  # (what failed, seconds until the next try)
        self.http = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The response, after retrying transient failures for up to ``retry_s``."""
        import httpx

        started = time.monotonic()
        delays = backoff(0.5, 10.0)
        while True:
            error: Exception | None = None
            try:
                r = self.http.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                what, wait, error = type(exc).__name__, next(delays), exc
            else:
                self.answered = True
                if r.status_code not in TRANSIENT_STATUS:
                    return r
                what, wait = f"HTTP {r.status_code}", _retry_after(r, next(delays))
            limit = self.retry_s if self.answered else min(self.retry_s, FIRST_CONTACT_S)
            if time.monotonic() + wait > started + limit:
                if error is None:
                    return r
                raise AdvisorError(
                    f"Cannot reach the advisor service at {self.url} ({what}, retried for "
                    f"{limit:.0f} s).",
                    "check --server and that `advisor serve` runs there.",
                ) from error
            if self.on_retry is not None:
                self.on_retry(what, wait)
            time.sleep(wait)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._answer(self._request(method, path, **kwargs))

    def _answer(self, r: Any) -> Any:
        """The response's JSON (None when it has no body), or its one-line AdvisorError."""
        if r.status_code == 401:
            raise AdvisorError(
                "The service refused the token (missing, unknown or revoked).",
                f"set {TOKEN_ENV} to a valid token (advisor token create NAME on the server).",
            )
        if r.status_code == 422:
            detail = r.json().get("detail")
            if isinstance(detail, list):
                detail = "; ".join(f"{d.get('field')}: {d.get('problem')}" for d in detail)
            raise AdvisorError(f"The service refused the request: {detail}.", "fix those fields.")
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail")
            except ValueError:
                detail = r.text[:200]
            raise AdvisorError(f"The service answered {r.status_code}: {detail}", None)
        return r.json() if r.content else None

    def start_suggestion(self, body: dict[str, Any]) -> str:
        """Queue a suggestion; return its job id."""
        return str(self._call("POST", "/v1/suggestions", json=body)["id"])

    def job(self, job_id: str) -> dict[str, Any]:
        """The job's status, progress and result."""
        return dict(self._call("GET", f"/v1/jobs/{job_id}"))

    def wait(
        self,
        job_id: str,
        poll_s: float = 0.5,
        timeout_s: float | None = None,
        progress: Callable[[str, int, int], None] | None = None,
        first_answer: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Poll until the job ends; its result, or AdvisorError with the job's error.
        ``first_answer`` hears the job's first answer (issue #46) once, when its progress
        carries one before the job ends."""
        end = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            job = self.job(job_id)
            if job["status"] == "done":
                return dict(job["result"])
            if job["status"] == "failed":
                raise AdvisorError(f"The service's job failed: {job['error']}", None)
            p = job.get("progress")
            if first_answer is not None and p and p.get("first_answer"):
                first_answer(dict(p["first_answer"]))
                first_answer = None  # once
            if progress and p:
                progress(p["phase"], int(p["done"]), int(p["total"]))
            if end is not None and time.monotonic() > end:
                raise AdvisorError(
                    f"Job {job_id} is still {job['status']} after {timeout_s:.0f} s.",
                    f"poll it later: GET {self.url}/v1/jobs/{job_id}",
                )
            time.sleep(poll_s)

    def suggest(self, body: dict[str, Any], **wait: Any) -> dict[str, Any]:
        """Start a suggestion and wait for its report."""
        return self.wait(self.start_suggestion(body), **wait)

    def studies(self, limit: int = 100) -> list[dict[str, Any]]:
        """The team's studies, every page."""
        out: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": limit}
        while True:
            page = list(self._call("GET", "/v1/studies", params=params))
            out += page
            if len(page) < limit:
                return out
            params["after"] = page[-1]["name"]

    def retry(self, job_id: str) -> dict[str, Any]:
        """Queue a failed job again (its study resumes); the job."""
        return dict(self._call("POST", f"/v1/jobs/{job_id}/retry"))

    def study(self, name: str) -> dict[str, Any]:
        """One study with its trials."""
        return dict(self._call("GET", f"/v1/studies/{name}"))

    def catalog(self, **filters: Any) -> dict[str, Any]:
        """Catalog rows (provider, service, accelerator, max_price, spot, snapshot)."""
        return dict(self._call("GET", "/v1/catalog", params=filters))

    def predict(self, body: dict[str, Any]) -> dict[str, Any]:
        """Predict machines from an uploaded probe."""
        return dict(self._call("POST", "/v1/predict", json=body))

    def add_hardware(self, body: dict[str, Any]) -> dict[str, Any]:
        """Add (or replace) a machine the team owns (issue #37); it, priced."""
        return dict(self._call("POST", "/v1/hardware", json=body))

    def hardware(self) -> list[dict[str, Any]]:
        """The machines the team owns."""
        return list(self._call("GET", "/v1/hardware"))

    def remove_hardware(self, name: str) -> None:
        """Remove one of the team's machines (one line when it owns none by that name)."""
        r = self._request("DELETE", f"/v1/hardware/{name}")
        if r.status_code == 404:
            raise AdvisorError(
                f"The team owns no machine '{name}' on {self.url}.",
                "see `advisor hardware list --server URL`.",
            )
        self._answer(r)


def _retry_after(response: Any, default: float) -> float:
    """The server's Retry-After (seconds, at most 60), else ``default``."""
    try:
        return min(60.0, max(0.0, float(response.headers.get("Retry-After", ""))))
    except ValueError:
        return default
