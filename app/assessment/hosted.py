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
PREFIXES = ("LAYER_", "ZONE_", "TILE_CACHE_", "JSHIS_", "HAZARD_", "BASEMAP_", "ASSESSMENT_")


def settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """Return the part of the app's config the work's process needs."""
    return {k: v for k, v in config.items() if k.startswith(PREFIXES)}


def payload(area: dict[str, Any], lang: str, provider: str) -> dict[str, Any]:
    """Return what a job sends the work's process: the place, the language, the provider."""
    return {"area": area, "lang": lang, "provider": provider}


def setup(config: Mapping[str, Any]) -> Callable[..., dict[str, Any]]:
    """Return the work: (payload, progress, stop) -> the report, as run_assessment's."""
    from ..caches.routed import RoutedCache
    from ..caches.singleflight import SingleFlightCache
    from .place.area import Area
    from .sources.basemap import DATASET as BASEMAP
    from .sources.portal import tile_ttl
    from .sources.providers import ZONES, make_provider
    from .work import run_assessment

    cache = RoutedCache(
        SingleFlightCache(
            maxsize=config["LAYER_CACHE_SIZE"], ttl=config["LAYER_CACHE_TTL_SECONDS"]
        ),
        SingleFlightCache(
            maxsize=config["TILE_CACHE_SIZE"], ttl=config["TILE_CACHE_TTL_SECONDS"], ttl_of=tile_ttl
        ),
        (*ZONES, BASEMAP),
    )
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
