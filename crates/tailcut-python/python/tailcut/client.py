"""A small typed client for the gateway's jobs API (``tailcut serve``): submit, wait, get,
cancel, synchronously (``Client``) or with asyncio (``AsyncClient``). Standard library
only; the API key goes in ``Authorization: Bearer``."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from tailcut.errors import GatewayError

__all__ = ["AsyncClient", "Client", "Job"]


@dataclass(frozen=True)
class Job:
    """A job as the gateway reports it (``GET /v1/jobs/{id}``)."""

    id: str
    state: str
    """``running``, ``succeeded``, ``failed``, ``cancelled`` or ``interrupted``."""
    route: Optional[str] = None
    winner: Optional[str] = None
    result: Any = None
    error: Optional[str] = None
    latency_ms: Optional[float] = None
    projected_cost_micro_usd: Optional[int] = None
    attempts: List[Dict[str, Any]] = field(default_factory=list, repr=False)
    receipts: List[Dict[str, Any]] = field(default_factory=list, repr=False)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def done(self) -> bool:
        """Whether the job has ended."""
        return self.state != "running"

    @classmethod
    def _of(cls, d: Dict[str, Any]) -> "Job":
        return cls(
            id=d["id"],
            state=d["state"],
            route=d.get("route"),
            winner=d.get("winner"),
            result=d.get("result"),
            error=d.get("error"),
            latency_ms=d.get("latency_ms"),
            projected_cost_micro_usd=d.get("projected_cost_micro_usd"),
            attempts=d.get("attempts") or [],
            receipts=d.get("receipts") or [],
            raw=d,
        )


class Client:
    """The jobs API of the gateway at ``base_url`` (e.g. ``http://127.0.0.1:8080``)."""

    def __init__(self, base_url: str, key: Optional[str] = None, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._key = key
        self.timeout = timeout

    def __repr__(self) -> str:  # never the key
        return f"Client({self.base_url!r})"

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None, wait: Optional[float] = None) -> Job:
        url = self.base_url + path
        if wait is not None:
            url += "?" + urllib.parse.urlencode({"wait": f"{max(0.0, min(wait, 3600.0)):g}"})
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("accept", "application/json")
        if data is not None:
            req.add_header("content-type", "application/json")
        if self._key is not None:
            req.add_header("authorization", f"Bearer {self._key}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout + (wait or 0.0)) as resp:
                return Job._of(json.loads(resp.read()))
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace")
            try:
                err = json.loads(text)["error"]
                message, code = str(err.get("message", text)), err.get("code")
            except (ValueError, KeyError, TypeError, AttributeError):
                message, code = text or e.reason, None
            raise GatewayError(f"{method} {path}: {e.code}: {message}", e.code, code) from None

    def submit(self, input: Any, route: Optional[str] = None, *, webhook: Optional[str] = None, wait: Optional[float] = None) -> Job:
        """Starts a job (``POST /v1/jobs``); with ``wait``, returns once it ends or after
        that many seconds."""
        body: Dict[str, Any] = {"input": input}
        if route is not None:
            body["route"] = route
        if webhook is not None:
            body["webhook"] = webhook
        return self._call("POST", "/v1/jobs", body, wait)

    def get(self, job_id: str) -> Job:
        """The job as it is now (``GET /v1/jobs/{id}``)."""
        return self._call("GET", f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}")

    def wait(self, job_id: str, timeout: float = 60.0) -> Job:
        """The job once it has ended, or as it is after ``timeout`` seconds."""
        return self._call("GET", f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}", wait=timeout)

    def cancel(self, job_id: str) -> Job:
        """Stops a running job (``DELETE /v1/jobs/{id}``): every live attempt is cancelled
        with a receipt. A finished job is returned as it is."""
        return self._call("DELETE", f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}")

    def run(self, input: Any, route: Optional[str] = None, timeout: float = 60.0) -> Job:
        """``submit`` then ``wait``."""
        return self.submit(input, route, wait=timeout)


class AsyncClient:
    """``Client`` for asyncio: each call runs in a worker thread, the event loop stays free."""

    def __init__(self, base_url: str, key: Optional[str] = None, *, timeout: float = 30.0) -> None:
        self._sync = Client(base_url, key, timeout=timeout)

    def __repr__(self) -> str:
        return f"AsyncClient({self._sync.base_url!r})"

    async def submit(self, input: Any, route: Optional[str] = None, *, webhook: Optional[str] = None, wait: Optional[float] = None) -> Job:
        """See ``Client.submit``."""
        return await asyncio.to_thread(self._sync.submit, input, route, webhook=webhook, wait=wait)

    async def get(self, job_id: str) -> Job:
        """See ``Client.get``."""
        return await asyncio.to_thread(self._sync.get, job_id)

    async def wait(self, job_id: str, timeout: float = 60.0) -> Job:
        """See ``Client.wait``."""
        return await asyncio.to_thread(self._sync.wait, job_id, timeout)

    async def cancel(self, job_id: str) -> Job:
        """See ``Client.cancel``."""
        return await asyncio.to_thread(self._sync.cancel, job_id)

    async def run(self, input: Any, route: Optional[str] = None, timeout: float = 60.0) -> Job:
        """See ``Client.run``."""
        return await asyncio.to_thread(self._sync.run, input, route, timeout)
