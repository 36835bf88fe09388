"""One pooled HTTP client for the public services: timeouts, bounded retries, per-host limits.

httpx keeps connections alive across calls and threads. A 5xx or a 429 is retried at most
``policy.retries`` times, waiting as its Retry-After asks but never beyond
``policy.retry_after_cap`` (so one slow service cannot hold a paid job past its lease),
else with exponential backoff. At most ``per_host`` requests are in flight to one host at
once, whatever the number of jobs and layers asking: the services are shared and polite
use is part of their terms. get_json() is one GET of a JSON document through that client.
"""

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..errors import UpstreamError

DEFAULT_PER_HOST = 4
RETRYABLE = frozenset({429, 500, 502, 503, 504})
USER_AGENT = "hazard-points/1.0 (area assessments)"


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently one upstream call is retried."""

    timeout: float = 10.0
    retries: int = 2
    backoff: float = 0.5  # seconds before the first retry; doubles each time
    retry_after_cap: float = 5.0


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


class Client:
    """A pooled client shared by every provider of one app."""

    def __init__(self, per_host: int = DEFAULT_PER_HOST) -> None:
        if per_host < 1:
            raise ValueError("per_host must be at least 1")
        self.per_host = per_host
        self._client = httpx.Client(
            headers={"User-Agent": USER_AGENT},
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            follow_redirects=False,
        )
        self._hosts: dict[str, threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()
        self.requests = 0  # every request sent, retries included (for the bench)

    def _slot(self, url: str) -> threading.BoundedSemaphore:
        host = urlsplit(url).netloc
        with self._lock:
            if host not in self._hosts:
                self._hosts[host] = threading.BoundedSemaphore(self.per_host)
            return self._hosts[host]

    def get(
        self,
        url: str,
        policy: RetryPolicy,
        *,
        ok: tuple[int, ...] = (200,),
        sleep: Callable[[float], None] = time.sleep,
    ) -> httpx.Response:
        """GET url; return the response when its status is in ok, else raise UpstreamError."""
        attempt = 0
        while True:
            try:
                with self._slot(url):
                    self.requests += 1
                    response = self._client.get(url, timeout=policy.timeout)
            except httpx.TimeoutException as exc:
                raise UpstreamError(f"no answer within {policy.timeout:g} s") from exc
            except httpx.ConnectError as exc:  # no such host, refused: nobody to ask
                raise UpstreamError("unreachable", None, repr(exc)) from exc
            except httpx.HTTPError as exc:
                raise UpstreamError("the connection failed", None, repr(exc)) from exc
            if response.status_code in ok:
                return response
            status = response.status_code
            if status not in RETRYABLE or attempt >= policy.retries:
                raise UpstreamError(_reason(status), status, response.text[:200])
            wait = retry_after_seconds(response.headers.get("Retry-After"), policy.retry_after_cap)
            sleep(policy.backoff * 2**attempt if wait is None else wait)
            attempt += 1

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()


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
