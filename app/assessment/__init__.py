"""The assessment domain: from what a person typed to the report they read.

Three rooms, each answering one question, and the job's step at the root:
- place: where? (the resolver, gazetteer, postal codes, outlines, meshes)
- sources: what do the services say? (the HTTP client, each provider, tiles and legends)
- report: what does it mean? (levels, headline and score, narrative, provenance)
- work.py runs one assessment through the three; errors.py holds the package's errors.

Imports flow place <- sources <- report <- work (tests/test_layers.py checks it); every room
may import errors.py. The package may import app.caches and the root modules (config,
extensions, models); never app.points, app.jobs or app.web.
"""

from .errors import ProviderError, Stopped
from .place.area import Area
from .place.resolver import PlaceAmbiguous, PlaceNotFound, PlaceSuperseded, resolve_place
from .sources.gsi_address import place_address
from .sources.providers import LayerProvider, make_provider
from .work import run_assessment

__all__ = [
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
]
