"""One pooled HTTP client for the public services: timeouts, bounded retries, per-host limits.

libcurl (pycurl) does the HTTP: its parsing runs in C with the GIL released for the whole
transfer, so a report's hundreds of calls take little from the interpreter that answers
the poll (about a third of httpx's CPU per call, bench/ZONES.md). Handles are pooled and
keep their connections alive across calls and threads. A 5xx or a 429 is retried at most
``policy.retries`` times, waiting as its Retry-After asks but never beyond
``policy.retry_after_cap`` (so one slow service cannot hold a paid job past its lease),
else with exponential backoff. At most ``per_host`` requests are in flight to one host at
once, whatever the number of jobs and layers asking: the services are shared and polite
use is part of their terms. get_json() is one GET of a JSON document through that client.
"""

import io
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import certifi
import pycurl

from ..errors import UpstreamError

DEFAULT_PER_HOST = 4
IDLE_HANDLES = 16  # handles (each with its kept-alive connections) kept between calls
RETRYABLE = frozenset({429, 500, 502, 503, 504})
USER_AGENT = "hazard-points/1.0 (area assessments)"
# libcurl's codes for "nobody to ask": the host has no address, or refused the connection.
UNREACHABLE = frozenset({pycurl.E_COULDNT_RESOLVE_HOST, pycurl.E_COULDNT_CONNECT})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently one upstream call is retried."""

    timeout: float = 10.0
    retries: int = 2
    backoff: float = 0.5  # seconds before the first retry; doubles each time
    retry_after_cap: float = 5.0


@dataclass(frozen=True)
class Response:
    """One answer: its status, its body (decoded as sent) and its headers (lower-case names)."""

    status_code: int
    content: bytes
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")


def retry_after_seconds(value: str | None, cap: float) -> float | None:
    """Return the wait a Retry-After header asks for (seconds or an HTTP date), capped."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(cap, max(0.0, seconds))


def _new_handle() -> pycurl.Curl:
    handle = pycurl.Curl()
    handle.setopt(pycurl.NOSIGNAL, 1)  # timeouts without signals: we are one thread of many
    handle.setopt(pycurl.USERAGENT, USER_AGENT)
    handle.setopt(pycurl.FOLLOWLOCATION, 0)
    handle.setopt(pycurl.ACCEPT_ENCODING, "")  # gzip and the rest, decoded, as httpx did
    handle.setopt(pycurl.CAINFO, certifi.where())
    return handle


class Client:
    """A pooled client shared by every provider of one app."""

    def __init__(self, per_host: int = DEFAULT_PER_HOST) -> None:
        if per_host < 1:
            raise ValueError("per_host must be at least 1")
        self.per_host = per_host
        self._idle: list[pycurl.Curl] = []  # last in, first out: the warmest connection
        self._hosts: dict[str, threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()
        self.requests = 0  # every request sent, retries included (for the bench)

    def _slot(self, url: str) -> threading.BoundedSemaphore:
        host = urlsplit(url).netloc
        with self._lock:
            if host not in self._hosts:
                self._hosts[host] = threading.BoundedSemaphore(self.per_host)
            return self._hosts[host]

    def _send(self, url: str, timeout: float) -> Response:
        with self._lock:
            handle = self._idle.pop() if self._idle else None
        handle = handle or _new_handle()
        body, lines = io.BytesIO(), []
        try:
            handle.setopt(pycurl.URL, url)
            handle.setopt(pycurl.TIMEOUT_MS, max(1, int(timeout * 1000)))
            handle.setopt(pycurl.WRITEDATA, body)
            handle.setopt(pycurl.HEADERFUNCTION, lines.append)
            handle.perform()  # the GIL is released for the whole transfer
            status = handle.getinfo(pycurl.RESPONSE_CODE)
            handle.setopt(pycurl.WRITEFUNCTION, _discard)  # the idle handle keeps no body
            handle.setopt(pycurl.HEADERFUNCTION, _discard)
        except BaseException:
            handle.close()  # its connection is in an unknown state: never reused
            raise
        with self._lock:
            if len(self._idle) < IDLE_HANDLES:
                self._idle.append(handle)
                handle = None
        if handle is not None:
            handle.close()
        return Response(status, body.getvalue(), _headers(lines))

    def get(
        self,
        url: str,
        policy: RetryPolicy,
        *,
        ok: tuple[int, ...] = (200,),
        sleep: Callable[[float], None] = time.sleep,
    ) -> Response:
        """GET url; return the response when its status is in ok, else raise UpstreamError."""
        attempt = 0
        while True:
            try:
                with self._slot(url):
                    self.requests += 1
                    response = self._send(url, policy.timeout)
            except UnicodeError as exc:  # a URL libcurl cannot take (not ASCII)
                raise UpstreamError("the connection failed", None, repr(exc)) from exc
            except pycurl.error as exc:
                code = exc.args[0] if exc.args else None
                if code == pycurl.E_OPERATION_TIMEDOUT:
                    raise UpstreamError(f"no answer within {policy.timeout:g} s") from exc
                if code in UNREACHABLE:  # no such host, refused: nobody to ask
                    raise UpstreamError("unreachable", None, repr(exc)) from exc
                raise UpstreamError("the connection failed", None, repr(exc)) from exc
            if response.status_code in ok:
                return response
            status = response.status_code
            if status not in RETRYABLE or attempt >= policy.retries:
                raise UpstreamError(_reason(status), status, response.text[:200])
            wait = retry_after_seconds(response.headers.get("retry-after"), policy.retry_after_cap)
            sleep(policy.backoff * 2**attempt if wait is None else wait)
            attempt += 1

    def close(self) -> None:
        """Close the pooled connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for handle in idle:
            handle.close()


def _discard(data: bytes) -> None:
    """Take what a handle writes between calls and keep none of it."""


def _headers(lines: list[bytes]) -> dict[str, str]:
    """Read the last response's header lines (a 100 Continue's come first) into a dict."""
    headers: dict[str, str] = {}
    for raw in lines:
        line = raw.decode("iso-8859-1").rstrip("\r\n")
        if line.startswith("HTTP/"):
            headers = {}
        elif ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return headers


def _reason(status: int) -> str:
    if status == 429:
        return "the service asked us to slow down (HTTP 429)"
    if status >= 500:
        return f"the service is unavailable (HTTP {status})"
    return f"the server answered HTTP {status}"


_shared: Client | None = None
_shared_lock = threading.Lock()


def shared_client(per_host: int = DEFAULT_PER_HOST) -> Client:
    """Return the process's client, made on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Client(per_host)
        return _shared


def _forget_in_child() -> None:
    # A forked child never shares its parent's connections: it makes its own client.
    global _shared, _shared_lock
    _shared, _shared_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


def get_json(
    url: str,
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """GET url and return its decoded JSON body, retrying 5xx and 429 within the policy.

    The call goes through the process's pooled client, under its per-host limit.
    """
    response = shared_client().get(url, policy, sleep=sleep)
    body = response.content
    try:
        return json.loads(body)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        raise UpstreamError(
            "the answer is not valid JSON", 200, body[:80].decode(errors="replace")
        ) from exc
