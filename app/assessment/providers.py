"""Where hazard data comes from: upstream datasets, fetched one key at a time.

Hazard layers are computed from a few shared upstream datasets, fetched per map tile
("12/3640/1514") or per municipality (its 6-digit code). Several layers read the same
dataset at the same moment (flood, tsunami, liquefaction and landslide all need the
elevation of every tile), which is why fetches go through the single-flight cache.

Two providers, chosen by LAYER_PROVIDER:
- ``demo`` (default): deterministic numbers derived from a hash of (dataset, key), with a
  sleep per call so that a job takes about ASSESSMENT_WORK_SECONDS;
- ``http``: GET {LAYER_HTTP_BASE_URL}/{dataset}/{key} with the standard library's
  urllib.request, a JSON object holding the dataset's fields, within
  LAYER_HTTP_TIMEOUT_SECONDS (10 by default).
"""

import hashlib
import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from .area import TILES_PER_AREA

DEFAULT_WORK_SECONDS = 30.0
DEFAULT_HTTP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Dataset:
    """An upstream dataset: fetched per tile or per municipality, with its number fields."""

    scope: str  # "tile" or "municipality"
    fields: Mapping[str, tuple[float, float]]  # name -> the range demo values are drawn from


DATASETS: dict[str, Dataset] = {
    "elevation": Dataset("tile", {"min_m": (0.0, 120.0), "max_slope_deg": (0.0, 40.0)}),
    "rainfall": Dataset("municipality", {"max_hourly_mm": (20.0, 120.0)}),
    "coast": Dataset("municipality", {"coast_distance_km": (0.0, 40.0)}),
    "ground": Dataset("municipality", {"soft_soil_ratio": (0.0, 1.0), "amplification": (1.0, 2.5)}),
    "faults": Dataset("municipality", {"shaking_prob_30y": (0.0, 0.9)}),
}

# The demo's calls on a job's longest path: the area's tiles, which the tile-reading layers
# fetch in step and share, then one per-municipality dataset (different layers fetch
# theirs in parallel). The demo sleeps work_seconds / this per call.
DEMO_CALLS_PER_JOB = TILES_PER_AREA + 1


class ProviderError(Exception):
    """An upstream dataset could not be fetched or made no sense."""

    def __init__(self, dataset: str, key: str, reason: str, detail: str = "") -> None:
        # reason is for the user; the key and the detail (an OS error, say) are for the log.
        where = f'hazard dataset "{dataset}" for {key}'
        super().__init__(f"{where}: {reason} ({detail})" if detail else f"{where}: {reason}")
        self.dataset = dataset
        self.key = key
        self.reason = reason


class Stopped(Exception):
    """The job stopped (reaped, shut down): a fetch gives up instead of calling upstream."""


class LayerProvider(Protocol):
    """A source of upstream hazard datasets."""

    name: str
    is_demo: bool

    def fetch(
        self, dataset: str, key: str, stop: threading.Event | None = None
    ) -> dict[str, float]:
        """Fetch one dataset for one tile or municipality key: one upstream call.

        Raise Stopped instead of calling (or of waiting longer) once stop is set.
        """
        ...


def _dataset(dataset: str, key: str) -> Dataset:
    try:
        return DATASETS[dataset]
    except KeyError:
        raise ProviderError(dataset, key, "no such dataset") from None


class DemoProvider:
    """Deterministic made-up numbers, with a delay per call like a real API."""

    name = "demo"
    is_demo = True

    def __init__(self, delay_seconds: float = 0.0) -> None:
        self.delay_seconds = delay_seconds

    def fetch(
        self, dataset: str, key: str, stop: threading.Event | None = None
    ) -> dict[str, float]:
        """Return the dataset's numbers for key, the same every time."""
        spec = _dataset(dataset, key)
        # The delay stands for an upstream call: a stopped job stops waiting on it at once.
        if (stop or threading.Event()).wait(self.delay_seconds):
            raise Stopped()
        digest = hashlib.sha256(f"{dataset}/{key}".encode()).digest()
        values = {}
        for i, (field, (low, high)) in enumerate(sorted(spec.fields.items())):
            fraction = int.from_bytes(digest[4 * i : 4 * i + 4], "big") / 2**32
            values[field] = round(low + (high - low) * fraction, 3)
        return values


class HttpProvider:
    """Datasets served as JSON at {base_url}/{dataset}/{key}."""

    name = "http"
    is_demo = False

    def __init__(self, base_url: str, timeout: float = DEFAULT_HTTP_TIMEOUT_SECONDS) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def fetch(
        self, dataset: str, key: str, stop: threading.Event | None = None
    ) -> dict[str, float]:
        """GET one dataset for one key and check it holds the dataset's numbers."""
        spec = _dataset(dataset, key)
        # A call in progress cannot be interrupted, but it lasts at most self.timeout, and
        # a stopped job makes no further call: its job thread has already let go of it.
        if stop is not None and stop.is_set():
            raise Stopped()
        url = f"{self.base_url}/{quote(dataset)}/{quote(key, safe='/')}"
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            exc.close()
            raise ProviderError(dataset, key, f"the server answered HTTP {exc.code}") from exc
        except TimeoutError as exc:
            raise ProviderError(dataset, key, f"no answer within {self.timeout:g} s") from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise ProviderError(dataset, key, f"no answer within {self.timeout:g} s") from exc
            raise ProviderError(dataset, key, "unreachable", str(exc.reason)) from exc
        except (OSError, http.client.HTTPException) as exc:  # reset, or not HTTP at all
            raise ProviderError(dataset, key, "the connection failed", repr(exc)) from exc
        try:
            payload = json.loads(body)
        except ValueError as exc:  # UnicodeDecodeError is a ValueError too
            raise ProviderError(dataset, key, "the answer is not valid JSON") from exc
        return _numbers(dataset, key, spec, payload)


def _numbers(dataset: str, key: str, spec: Dataset, payload: Any) -> dict[str, float]:
    if not isinstance(payload, dict):
        raise ProviderError(dataset, key, "the answer is not a JSON object")
    values = {}
    for field in spec.fields:
        value = payload.get(field)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ProviderError(dataset, key, f'the answer lacks the number "{field}"')
        values[field] = float(value)
    return values


def make_provider(config: Mapping[str, Any]) -> LayerProvider:
    """Return the provider LAYER_PROVIDER names, configured from the app's config."""
    kind = str(config.get("LAYER_PROVIDER") or "demo").strip().lower()
    if kind == "demo":
        work_seconds = float(config.get("ASSESSMENT_WORK_SECONDS", DEFAULT_WORK_SECONDS))
        if work_seconds < 0:
            raise ValueError("ASSESSMENT_WORK_SECONDS must not be negative")
        return DemoProvider(work_seconds / DEMO_CALLS_PER_JOB)
    if kind == "http":
        base_url = str(config.get("LAYER_HTTP_BASE_URL") or "").strip()
        if not base_url:
            raise ValueError("LAYER_PROVIDER=http needs LAYER_HTTP_BASE_URL")
        timeout = config.get("LAYER_HTTP_TIMEOUT_SECONDS") or DEFAULT_HTTP_TIMEOUT_SECONDS
        if float(timeout) <= 0:
            raise ValueError("LAYER_HTTP_TIMEOUT_SECONDS must be positive")
        return HttpProvider(base_url, float(timeout))
    raise ValueError(f"LAYER_PROVIDER must be 'demo' or 'http', not {kind!r}")
