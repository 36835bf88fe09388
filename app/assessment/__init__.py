"""The assessment domain: from what a person typed to the report they read.

Five rooms, each answering one question, and the job's step at the root:
- registers: what do the published registers say? (outlines, 町丁目, postal codes, changes
  of units, the keys names are read by)
- place: where? (the resolver, gazetteer, the 町丁目 meant, a point, the Area)
- grid: which tiles and meshes cover it, and what their pixels hold? (tile plan, decoding
  and legends, the pixel pool, the pixel under a spot, 250 m meshes)
- sources: what do the services say? (the HTTP client, each provider, base map, coverage)
- report: what does it mean? (levels, headline and score, narrative, provenance, the map)
- work.py runs one assessment through them (fetchers.py its fetch pool, assemble.py the
  report put together); errors.py holds the package's errors.

Imports flow registers <- place <- grid <- sources <- report <- work (tests/test_layers.py
checks it); every room may import errors.py. The package may import app.caches,
app.operations and the root modules (config, extensions, models); never app.points, app.jobs
or app.web. job.py is the report as a job's work (app/jobs/work.py's contract).
"""

from importlib import import_module
from typing import Any

# Imported on first use (PEP 562), not with the package: the pixel pool's processes import
# grid/pixels.py, and so this package, and need none of the resolver's database.
_EXPORTS = {
    "ProviderError": ".errors",
    "Stopped": ".errors",
    "Area": ".place.area",
    "PlaceAmbiguous": ".place.resolver",
    "PlaceNotFound": ".place.resolver",
    "PlaceSuperseded": ".place.resolver",
    "resolve_place": ".place.resolver",
    "unread": ".place.resolver",
    "UNREAD": ".place.resolver",
    "place_address": ".sources.gsi_address",
    "LayerProvider": ".sources.providers",
    "make_provider": ".sources.providers",
    "run_assessment": ".work",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name], __name__), name)


__all__ = [
    "UNREAD",
    "Area",
    "LayerProvider",
    "PlaceAmbiguous",
    "PlaceNotFound",
    "PlaceSuperseded",
    "ProviderError",
    "Stopped",
    "make_provider",
    "place_address",
    "resolve_place",
    "run_assessment",
    "unread",
]
