"""Where hazard data comes from: upstream datasets, fetched one key at a time.

Hazard layers are computed from a few shared upstream datasets, fetched per map tile
("12/3640/1514") or per municipality (its 6-digit code). Several layers read the same
dataset at the same moment (flood, tsunami, liquefaction and landslide all need the
elevation of every tile), which is why fetches go through the single-flight cache.

Providers, chosen by LAYER_PROVIDER, for every dataset or per dataset:
- ``demo`` (default): deterministic numbers derived from a hash of (dataset, key), with a
  sleep per call so that a job takes about ASSESSMENT_WORK_SECONDS;
- ``http``: GET {LAYER_HTTP_BASE_URL}/{dataset}/{key} with the standard library's
  urllib.request, a JSON object holding the dataset's fields, within
  LAYER_HTTP_TIMEOUT_SECONDS (10 by default);
- ``jshis`` (faults, ground) and ``gsi`` (elevation): real public services, see jshis.py
  and gsi.py; asked at the area's sample points (sampling.py).
A mapping such as ``faults=jshis,ground=jshis,elevation=gsi,*=demo`` routes each dataset to
its provider; ``*`` names the rest (demo when left out).
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

from .area import TILES_PER_AREA, Area, tile_key
from .gsi import DEFAULT_URL as GSI_DEFAULT_URL
from .gsi import GsiElevationProvider
from .jshis import DEFAULT_BASE_URL as JSHIS_DEFAULT_URL
from .jshis import JshisProvider
from .upstream import ProviderError, RetryPolicy

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


class Stopped(Exception):
    """The job stopped (reaped, shut down): a fetch gives up instead of calling upstream."""


class LayerProvider(Protocol):
    """A source of upstream hazard datasets."""

    name: str
    is_demo: bool

    def fetch(
        self, dataset: str, key: str, stop: threading.Event | None = None
    ) -> dict[str, Any] | None:
        """Fetch one dataset for one key; None where the source has no data for it.

        Raise Stopped instead of calling (or of waiting longer) once stop is set.
        """
        ...

    def keys(self, area: Area, dataset: str) -> list[str]:
        """Return the keys by which the dataset is fetched for an area."""
        ...

    def source(self, dataset: str) -> dict[str, Any]:
        """Describe where the dataset's figures come from, for the report."""
        ...


def default_keys(area: Area, dataset: str) -> list[str]:
    """Return the area's tiles for a tile dataset, or its code for a municipality one."""
    if DATASETS[dataset].scope == "tile":
        return [tile_key(tile) for tile in area.tiles]
    return [area.code]


def _dataset(dataset: str, key: str) -> Dataset:
    try:
        return DATASETS[dataset]
    except KeyError:
        raise ProviderError(dataset, key, "no such dataset") from None


class DemoProvider:
    """Deterministic made-up numbers, with a delay per call like a real API."""

    name = "demo"
    is_demo = True
    keys = staticmethod(default_keys)

    def source(self, dataset: str) -> dict[str, Any]:
        """Say plainly that these figures are made up."""
        return {"provider": self.name, "real": False}

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
    keys = staticmethod(default_keys)

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

    def source(self, dataset: str) -> dict[str, Any]:
        """Name the configured service; it vouches for its own figures."""
        return {"provider": self.name, "real": True, "service": self.base_url}


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


class RoutedProvider:
    """Each dataset from the provider the configuration names for it."""

    def __init__(self, routes: Mapping[str, LayerProvider]) -> None:
        self.routes = dict(routes)
        self.name = ",".join(f"{ds}={p.name}" for ds, p in sorted(self.routes.items()))
        self.is_demo = any(p.is_demo for p in self.routes.values())

    def _for(self, dataset: str, key: str = "") -> LayerProvider:
        try:
            return self.routes[dataset]
        except KeyError:
            raise ProviderError(dataset, key, "no such dataset") from None

    def fetch(self, dataset: str, key: str, **options: Any) -> dict[str, Any] | None:
        """Fetch from the dataset's provider (options, such as a stop signal, pass through)."""
        return self._for(dataset, key).fetch(dataset, key, **options)

    def keys(self, area: Area, dataset: str) -> list[str]:
        """Return the keys the dataset's provider asks by."""
        return self._for(dataset).keys(area, dataset)

    def source(self, dataset: str) -> dict[str, Any]:
        """Describe the dataset's provider."""
        return self._for(dataset).source(dataset)

    def real_providers(self) -> list[LayerProvider]:
        """Return each distinct non-demo provider once (for `flask providers-check`)."""
        distinct = {id(p): p for p in self.routes.values() if not p.is_demo}
        return list(distinct.values())


def _demo(config: Mapping[str, Any]) -> DemoProvider:
    work_seconds = float(config.get("ASSESSMENT_WORK_SECONDS", DEFAULT_WORK_SECONDS))
    if work_seconds < 0:
        raise ValueError("ASSESSMENT_WORK_SECONDS must not be negative")
    return DemoProvider(work_seconds / DEMO_CALLS_PER_JOB)


def _timeout(config: Mapping[str, Any]) -> float:
    timeout = float(config.get("LAYER_HTTP_TIMEOUT_SECONDS") or DEFAULT_HTTP_TIMEOUT_SECONDS)
    if timeout <= 0:
        raise ValueError("LAYER_HTTP_TIMEOUT_SECONDS must be positive")
    return timeout


def _http(config: Mapping[str, Any]) -> HttpProvider:
    base_url = str(config.get("LAYER_HTTP_BASE_URL") or "").strip()
    if not base_url:
        raise ValueError("LAYER_PROVIDER=http needs LAYER_HTTP_BASE_URL")
    return HttpProvider(base_url, _timeout(config))


def _policy(config: Mapping[str, Any]) -> RetryPolicy:
    retries = int(config.get("LAYER_HTTP_RETRIES", 2))
    cap = float(config.get("LAYER_RETRY_AFTER_MAX_SECONDS", 5))
    backoff = float(config.get("LAYER_RETRY_BACKOFF_SECONDS", 0.5))
    if retries < 0 or cap < 0 or backoff < 0:
        raise ValueError("LAYER_HTTP_RETRIES and the retry waits must not be negative")
    return RetryPolicy(_timeout(config), retries, backoff, cap)


def _jshis(config: Mapping[str, Any]) -> JshisProvider:
    return JshisProvider(
        str(config.get("JSHIS_BASE_URL") or JSHIS_DEFAULT_URL),
        version=str(config.get("JSHIS_MAP_VERSION") or "Y2024"),
        case=str(config.get("JSHIS_CASE") or "AVR"),
        ground_version=str(config.get("JSHIS_GROUND_VERSION") or "V4"),
        policy=_policy(config),
    )


def _gsi(config: Mapping[str, Any]) -> GsiElevationProvider:
    url = str(config.get("GSI_ELEVATION_URL") or GSI_DEFAULT_URL)
    return GsiElevationProvider(url, policy=_policy(config))


FACTORIES = {"demo": _demo, "http": _http, "jshis": _jshis, "gsi": _gsi}
SERVES = {"jshis": JshisProvider.datasets, "gsi": GsiElevationProvider.datasets}


def make_provider(config: Mapping[str, Any]) -> LayerProvider:
    """Return the provider LAYER_PROVIDER names, configured from the app's config.

    "demo" or "http" serve every dataset; "dataset=provider,...,*=provider" routes each.
    """
    kind = str(config.get("LAYER_PROVIDER") or "demo").strip().lower()
    if kind in ("demo", "http"):
        return FACTORIES[kind](config)
    if "=" not in kind:
        raise ValueError(
            f"LAYER_PROVIDER must be 'demo', 'http' or a mapping like "
            f"'faults=jshis,ground=jshis,elevation=gsi,*=demo', not {kind!r}"
        )
    wanted: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in kind.split(","))):
        dataset, _, name = (x.strip() for x in part.partition("="))
        if dataset != "*" and dataset not in DATASETS:
            raise ValueError(
                f"LAYER_PROVIDER names no dataset {dataset!r}; datasets: {sorted(DATASETS)}"
            )
        if name not in FACTORIES:
            raise ValueError(
                f"LAYER_PROVIDER names no provider {name!r}; providers: {sorted(FACTORIES)}"
            )
        wanted[dataset] = name
    fallback = wanted.pop("*", "demo")
    made: dict[str, LayerProvider] = {}
    routes: dict[str, LayerProvider] = {}
    for dataset in DATASETS:
        name = wanted.get(dataset, fallback)
        if name in SERVES and dataset not in SERVES[name]:
            if dataset in wanted:
                raise ValueError(f"{name} does not serve {dataset!r}, only {SERVES[name]}")
            name = "demo"  # "*=jshis" means: jshis wherever it can
        if name not in made:
            made[name] = FACTORIES[name](config)
        routes[dataset] = made[name]
    return RoutedProvider(routes)
