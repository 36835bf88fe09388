"""The report's work as the work's process runs it (app/jobs/offload.py).

setup(config) is called once in that process: it keeps one layer cache for every job the
process runs (neighbours share what they fetched, as in the worker) and one provider per
LAYER_PROVIDER setting, made on first use. A job's payload names the setting the worker
serves at its start ("real" or "demo" when LAYER_PROVIDER is unset and the services were
probed), so the report reads what the worker's pages say it reads.
"""

import threading
from collections.abc import Callable, Mapping
from typing import Any

# The settings that shape a report's work: the work's process gets these and no secret.
PREFIXES = (
    "LAYER_", "ZONE_", "TILE_CACHE_", "JSHIS_", "HAZARD_", "BASEMAP_", "EVACUATION_", "ASSESSMENT_"
)  # fmt: skip


def settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """Return the part of the app's config the work's process needs."""
    return {k: v for k, v in config.items() if k.startswith(PREFIXES)}


def payload(area: dict[str, Any], lang: str, provider: str) -> dict[str, Any]:
    """Return what a job sends the work's process: the place, the language, the provider."""
    return {"area": area, "lang": lang, "provider": provider}


def layer_cache(config: Mapping[str, Any], share: Callable[..., Any] | None = None) -> Any:
    """Return the layer cache: layers by key, tiles (id/z/x/y) by theirs with tile_ttl.

    Tiles live long: the portal's zones change a few times a year, and the base map under
    them (GSI's pale map) hardly more. share(local, ttl_key), when given, wraps each local
    cache (the worker's SharedSingleFlightCache when instances share their fetches).
    """
    from ..caches.routed import RoutedCache
    from ..caches.singleflight import SingleFlightCache
    from .sources.basemap import DATASET as BASEMAP
    from .sources.evacuation import DATASETS as SITES
    from .sources.portal import tile_ttl
    from .sources.providers import ZONES

    def cache(size_key: str, ttl_key: str, ttl_of: Any = None) -> Any:
        local = SingleFlightCache(maxsize=config[size_key], ttl=config[ttl_key], ttl_of=ttl_of)
        return share(local, ttl_key) if share else local

    return RoutedCache(
        cache("LAYER_CACHE_SIZE", "LAYER_CACHE_TTL_SECONDS"),
        cache("TILE_CACHE_SIZE", "TILE_CACHE_TTL_SECONDS", tile_ttl),
        (*ZONES, BASEMAP, *SITES),
    )


def setup(config: Mapping[str, Any]) -> Callable[..., dict[str, Any]]:
    """Return the work: (payload, progress, stop) -> the report, as run_assessment's."""
    from .place.area import Area
    from .sources.providers import make_provider
    from .work import run_assessment

    cache = layer_cache(config)
    providers: dict[str, Any] = {}
    lock = threading.Lock()

    def work(job: dict[str, Any], progress: Callable[[str, int], None], stop: threading.Event):
        with lock:
            if (provider := providers.get(job["provider"])) is None:
                made = make_provider({**config, "LAYER_PROVIDER": job["provider"]})
                provider = providers[job["provider"]] = made
        return run_assessment(
            Area.from_dict(job["area"]),
            job["lang"],
            provider=provider,
            cache=cache,
            progress=progress,
            stop=stop,
        )

    return work
