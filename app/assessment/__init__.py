"""The assessment domain: places, hazard-layer providers, analysis and the job's work."""

from .area import Area
from .places import PlaceAmbiguous, PlaceNotFound, resolve_place
from .providers import LayerProvider, ProviderError, make_provider
from .work import run_assessment

__all__ = [
    "Area",
    "LayerProvider",
    "PlaceAmbiguous",
    "PlaceNotFound",
    "ProviderError",
    "make_provider",
    "resolve_place",
    "run_assessment",
]
