"""Where hazard data comes from: upstream datasets, fetched one key at a time.

Hazard layers are read from a few upstream datasets, fetched per map tile ("15/29102/12903",
the designated zones of the hazard map portal) or per 250 m mesh (J-SHIS's ground and
shaking). Two jobs for neighbouring places read some of the same tiles, which is why
fetches go through the single-flight (and shared) cache.

Providers, chosen by LAYER_PROVIDER, for every dataset or per dataset:
- ``demo`` (default): tiles painted in the legends' colours by a deterministic field over
  longitude and latitude (portal.py paint), and mesh numbers from a hash of the mesh, with
  pauses spread over each layer's calls so that a job takes about ASSESSMENT_WORK_SECONDS;
- ``http``: GET {LAYER_HTTP_BASE_URL}/{dataset}/{key}, a JSON object holding the dataset's
  fields (for a zone dataset, "png": the tile in base64, or null), within
  LAYER_HTTP_TIMEOUT_SECONDS (10 by default);
- ``portal`` (the zone datasets) and ``jshis`` (faults, ground): the real public services,
  see portal.py and jshis.py;
- ``real``: every real provider at once.
A mapping such as ``faults=jshis,ground=jshis,*=demo`` routes each dataset to its provider;
``*`` names the rest (demo when left out).
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

from ..errors import ProviderError, Stopped
from ..grid import pixels
from ..grid.sampling import mesh_centre
from ..place.area import Area
from . import basemap, evacuation, portal
from .http import RetryPolicy, shared_client
from .jshis import DEFAULT_BASE_URL as JSHIS_DEFAULT_URL
from .jshis import JshisProvider, mesh_keys

DEFAULT_WORK_SECONDS = 30.0
DEFAULT_HTTP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Dataset:
    """An upstream dataset: fetched per tile or per municipality, with its number fields."""

    scope: str  # "zones" (portal tiles, by z/x/y) or "mesh" (250 m meshes)
    fields: Mapping[str, tuple[float, float]]  # name -> the range demo values are drawn from


DATASETS: dict[str, Dataset] = {
    **{name: Dataset("zones", {}) for name in portal.ZONE_DATASETS},
    "ground": Dataset(
        "mesh",
        {"jcode": (1, 23), "soft_soil_ratio": (0.0, 1.0), "amplification": (1.0, 2.5)},
    ),
    "faults": Dataset("mesh", {"shaking_prob_30y": (0.0, 0.9)}),
}
ZONES = tuple(portal.ZONE_DATASETS)


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

    def origin(self, dataset: str) -> str:
        """Name who answers for the dataset (provider and base URL): part of every cache key,
        so an answer of one source (the demo's painted tiles) is never read back as another's.
        """
        ...


def origin_of(provider: Any, dataset: str) -> str:
    """Return a provider's origin for a dataset (its name, for one that says nothing more)."""
    origin = getattr(provider, "origin", None)
    return origin(dataset) if origin is not None else str(provider.name)


def default_keys(area: Area, dataset: str) -> list[str]:
    """Return the tiles covering the area's outline, or the meshes sampled inside it."""
    from ..grid.zones import dataset_keys

    if DATASETS[dataset].scope == "zones":
        return dataset_keys(area, dataset)
    return mesh_keys(area)


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
    evacuation = evacuation.DemoSites()  # constructed sites, never a municipality's record

    def source(self, dataset: str) -> dict[str, Any]:
        """Say plainly that these figures are made up."""
        return {"provider": self.name, "real": False}

    def origin(self, dataset: str) -> str:
        """Name the demo: its answers are its own."""
        return "demo"

    def __init__(self, work_seconds: float = 0.0) -> None:
        self.work_seconds = work_seconds

    def pause(self, dataset: str, share: float) -> float:
        """Return the seconds real calls would take for this share of a layer's calls.

        Every layer spans the job's work seconds, its calls evenly, as the layers of a real
        report read side by side: so the bar (each layer's calls done) moves with the clock
        and the time left holds. The job waits them before asking (holding no thread; a
        stopped job stops waiting at once).
        """
        return self.work_seconds * share

    def fetch(self, dataset: str, key: str, stop: threading.Event | None = None) -> dict[str, Any]:
        """Return the dataset's answer for key, the same every time."""
        spec = _dataset(dataset, key)
        if stop is not None and stop.is_set():
            raise Stopped()
        if spec.scope == "zones":
            try:
                return portal.encode(pixels.call(portal.paint, dataset, key))
            except ValueError:
                raise ProviderError(dataset, key, "not a tile") from None
        if spec.scope == "mesh" and key.isdigit() and len(key) == 10:
            # The demo's own work, like its painting: in its turn (pixels.Turns), or the
            # meshes of many reports paced alike are worked at one moment, beside the poll.
            with pixels.turn():
                return _demo_mesh(dataset, key)
        digest = hashlib.sha256(f"{dataset}/{key}".encode()).digest()
        values = {}
        for i, (field, (low, high)) in enumerate(sorted(spec.fields.items())):
            fraction = int.from_bytes(digest[4 * i : 4 * i + 4], "big") / 2**32
            values[field] = round(low + (high - low) * fraction, 3)
        if "jcode" in values:
            values["jcode"] = int(values["jcode"])
        return values


# The demo's landforms, lowest field first: mountains and terraces to reclaimed land.
DEMO_LANDFORMS = (1, 3, 9, 8, 10, 11, 12, 13, 15, 14, 20)


def _demo_mesh(dataset: str, key: str) -> dict[str, Any]:
    """Return a mesh's demo numbers from smooth fields over its centre: neighbours agree."""
    import numpy as np

    lat, lon = mesh_centre(key)
    value = float(portal.demo_field(dataset, np.array([lon]), np.array([lat]))[0])
    if dataset == "faults":
        return {"shaking_prob_30y": round(0.02 + 0.6 * value**2, 3)}
    jcode = DEMO_LANDFORMS[min(len(DEMO_LANDFORMS) - 1, int(value * len(DEMO_LANDFORMS)))]
    return {
        "jcode": jcode,
        "amplification": round(1.0 + 1.5 * value, 3),
        "soft_soil_ratio": 1.0 if value > 0.6 else 0.0,
    }


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

    def origin(self, dataset: str) -> str:
        """Name the service by its base URL."""
        return f"http {self.base_url}"


def _numbers(dataset: str, key: str, spec: Dataset, payload: Any) -> dict[str, Any]:
    if not isinstance(payload, dict):
        raise ProviderError(dataset, key, "the answer is not a JSON object")
    if spec.scope == "zones":
        png = payload.get("png", False)
        if png is not None and not isinstance(png, str):
            raise ProviderError(dataset, key, 'the answer lacks the tile "png" (base64 or null)')
        return {"png": png}
    values: dict[str, Any] = {}
    for field in spec.fields:
        value = payload.get(field)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ProviderError(dataset, key, f'the answer lacks the number "{field}"')
        values[field] = int(value) if field == "jcode" else float(value)
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

    def pause(self, dataset: str, share: float) -> float:
        """Return the pause of the dataset's provider (only the demo pauses)."""
        pause = getattr(self._for(dataset), "pause", None)
        return pause(dataset, share) if pause is not None else 0.0

    def source(self, dataset: str) -> dict[str, Any]:
        """Describe the dataset's provider."""
        return self._for(dataset).source(dataset)

    def origin(self, dataset: str) -> str:
        """Name the dataset's provider and base URL."""
        return origin_of(self._for(dataset), dataset)

    @property
    def basemap(self) -> Any:
        """Return the base map of the zones' provider (None: the demo draws none)."""
        return getattr(self.routes.get(ZONES[0]), "basemap", None)

    @property
    def evacuation(self) -> Any:
        """Return the evacuation sites of the zones' provider (None: it reads none)."""
        return getattr(self.routes.get(ZONES[0]), "evacuation", None)

    def real_providers(self) -> list[LayerProvider]:
        """Return each distinct non-demo provider once (for `flask providers-check`)."""
        distinct = {id(p): p for p in self.routes.values() if not p.is_demo}
        return list(distinct.values())


def _demo(config: Mapping[str, Any]) -> DemoProvider:
    work_seconds = float(config.get("ASSESSMENT_WORK_SECONDS", DEFAULT_WORK_SECONDS))
    if work_seconds < 0:
        raise ValueError("ASSESSMENT_WORK_SECONDS must not be negative")
    return DemoProvider(work_seconds)


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


def _portal(config: Mapping[str, Any]) -> portal.PortalProvider:
    url = str(config.get("HAZARD_PORTAL_URL") or portal.DEFAULT_URL)
    per_host = int(config.get("LAYER_HTTP_PER_HOST", 4))
    client, policy = shared_client(per_host), _policy(config)
    base = basemap.BaseMap(str(config.get("BASEMAP_URL") or basemap.DEFAULT_URL), client, policy)
    sites_url = str(config.get("EVACUATION_SITES_URL") or evacuation.DEFAULT_URL)
    sites = evacuation.GsiSites(sites_url, client, policy)
    return portal.PortalProvider(url, client, policy, basemap=base, evacuation=sites)


FACTORIES = {"demo": _demo, "http": _http, "jshis": _jshis, "portal": _portal}
SERVES = {"jshis": JshisProvider.datasets, "portal": portal.PortalProvider.datasets}
# LAYER_PROVIDER=real: every dataset from its real service.
REAL = "faults=jshis,ground=jshis," + ",".join(f"{name}=portal" for name in ZONES)


def make_provider(config: Mapping[str, Any]) -> LayerProvider:
    """Return the provider LAYER_PROVIDER names, configured from the app's config.

    "demo" or "http" serve every dataset; "dataset=provider,...,*=provider" routes each.
    """
    from ..grid import zones

    zones.configure(int(config.get("ZONE_TILE_BUDGET") or zones.DEFAULT_TILE_BUDGET))
    processes, decoders = config.get("ZONE_PROCESSES"), config.get("ZONE_DECODERS")
    pixels.configure(
        None if processes in (None, "") else int(processes),
        None if decoders in (None, "") else int(decoders),
    )
    kind = str(config.get("LAYER_PROVIDER") or "demo").strip().lower()
    if kind == "real":
        kind = REAL
    if kind in ("demo", "http"):
        return FACTORIES[kind](config)
    if "=" not in kind:
        raise ValueError(
            f"LAYER_PROVIDER must be 'demo', 'http', 'real' or a mapping like "
            f"'faults=jshis,ground=jshis,*=demo', not {kind!r}"
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
