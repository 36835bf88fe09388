"""One GET of a JSON document from a public service: a timeout, a bounded retry, clear errors.

Real providers (J-SHIS, the GSI elevation API) share this. A 5xx or a 429 is retried at
most ``retries`` times with exponential backoff; a Retry-After header is honoured, but
never beyond ``retry_after_cap`` seconds, so one slow service cannot hold a paid job past
its lease. Every other failure raises UpstreamError at once with a reason a user can read.
"""

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

RETRYABLE = frozenset({429, 500, 502, 503, 504})
USER_AGENT = "hazard-points/1.0 (area assessments)"


class ProviderError(Exception):
    """An upstream dataset could not be fetched or made no sense."""

    def __init__(self, dataset: str, key: str, reason: str, detail: str = "") -> None:
        # reason is for the user; the key and the detail (an OS error, say) are for the log.
        where = f'hazard dataset "{dataset}" for {key}'
        super().__init__(f"{where}: {reason} ({detail})" if detail else f"{where}: {reason}")
        self.dataset = dataset
        self.key = key
        self.reason = reason


class ProviderFailure(Exception):
    """A real provider's call failed for a reason the user can read (dataset not yet known)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


class UpstreamError(Exception):
    """A service could not be asked, or answered with an error; status is its HTTP code."""

    def __init__(self, reason: str, status: int | None = None, detail: str = "") -> None:
        super().__init__(f"{reason} ({detail})" if detail else reason)
        self.reason = reason
        self.status = status
        self.detail = detail


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


def get_json(
    url: str,
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """GET url and return its decoded JSON body, retrying 5xx and 429 within the policy.

    The call goes through the process's pooled client (http.py), under its per-host limit.
    """
    from .http import shared_client

    response = shared_client().get(url, policy, sleep=sleep)
    body = response.content
    try:
        return json.loads(body)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        raise UpstreamError(
            "the answer is not valid JSON", 200, body[:80].decode(errors="replace")
        ) from exc
