"""The assessment domain: places, hazard-layer providers, analysis and the job's work.

May import app.caches and the root modules (config, extensions, models); never app.points,
app.jobs or app.web.
"""

from .place.area import Area
from .place.resolver import PlaceAmbiguous, PlaceNotFound, PlaceSuperseded, resolve_place
from .sources.providers import LayerProvider, ProviderError, Stopped, make_provider
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
    "resolve_place",
    "run_assessment",
]
