"""Which tiles an assessment reads for an area, and which of their pixels are the area's.

plan(area) is the area's outline (or a point's circle on land), the deepest zoom at which
the tiles touching it, counted exactly, fit the per-dataset budget, those tiles, and the
prefectures it lies in (the landslide and inland-flooding datasets are read per
prefecture); every zone dataset of a job reads the same tiles, so the place's masks (pixels
inside the outline) are computed once per tile (Masks), kept packed, and only for
straddling tiles, with the plan: shared by a job's layers and by every report of the place
while its plan is kept.
"""

import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import mercantile
import numpy as np
from shapely.geometry.base import BaseGeometry

from ..registers.outlines import Outline, outline_of, prefectures_touching
from . import tiles

DEFAULT_TILE_BUDGET = 64
# The datasets the portal publishes per prefecture, with no national path (its catalogue).
PER_PREFECTURE = frozenset(
    {"debris_flow_zones", "steep_slope_zones", "landslide_zones", "inland_flood_zones"}
)
_settings = {"budget": DEFAULT_TILE_BUDGET}


def configure(budget: int) -> None:
    """Set the tiles read per zone dataset per job (ZONE_TILE_BUDGET), at most 256."""
    if not 1 <= budget <= tiles.TILE_BUDGET:
        raise ValueError(f"ZONE_TILE_BUDGET must be between 1 and {tiles.TILE_BUDGET}")
    if budget != _settings["budget"]:
        _settings["budget"] = budget
        _plan.cache_clear()


@dataclass(frozen=True)
class Plan:
    """The extent read for an area, at which zoom, through which tiles."""

    outline: Outline
    zoom: int
    tiles: tuple[mercantile.Tile, ...]
    budget: int
    prefectures: tuple[str, ...] = ()  # two-digit codes, the area's own first
    # Which pixels of each tile are inside, kept with the plan: a large city's are 0.2-0.4 s
    # of a report's ~1 s of CPU, the same for every report of the place.
    masks: "Masks | None" = field(default=None, compare=False, repr=False)

    @property
    def keys(self) -> list[str]:
        """Return the tiles' "z/x/y" keys."""
        return [tiles.tile_key(tile) for tile in self.tiles]

    def describe(self) -> dict[str, Any]:
        """Return what the report says about the extent and the zoom."""
        lat = (self.outline.geometry.bounds[1] + self.outline.geometry.bounds[3]) / 2
        return {
            "prefectures": list(self.prefectures),
            "kind": self.outline.kind,
            "note": self.outline.note,
            "zoom": self.zoom,
            "tiles": len(self.tiles),
            "budget": self.budget,
            "metres_per_pixel": round(tiles.metres_per_pixel(self.zoom, lat), 1),
        }


@lru_cache(maxsize=32)
def _plan(area: Any, radius_m: float, budget: int) -> Plan:
    outline = outline_of(area)
    zoom = tiles.zoom_for(outline.geometry, budget)
    prefectures = prefectures_touching(outline.geometry, str(area.code)[:2])
    covering = tuple(tiles.covering(outline.geometry, zoom))
    return Plan(outline, zoom, covering, budget, tuple(prefectures), Masks(outline.geometry))


def plan(area: Any) -> Plan:
    """Return the area's plan (cached: every dataset and job of one area asks the same)."""
    return _plan(area, getattr(area, "radius_m", 0.0), _settings["budget"])


def dataset_keys(area: Any, dataset: str) -> list[str]:
    """Return the keys a zone dataset is fetched by: per prefecture where it is published so."""
    planned = plan(area)
    if dataset not in PER_PREFECTURE:
        return planned.keys
    return [f"{pref}/{key}" for key in planned.keys for pref in planned.prefectures]


class Masks:
    """A place's inside-the-outline masks, per tile, computed once and kept packed."""

    def __init__(self, outline: BaseGeometry) -> None:
        self.outline = outline
        self._lock = threading.Lock()
        self._masks: dict[mercantile.Tile, Any] = {}

    def packed(self, tile: mercantile.Tile) -> Any:
        """Return the tile's mask as kept: a bool for a whole tile, else its packed bits."""
        with self._lock:
            known = self._masks.get(tile)
        if known is None:
            mask = tiles.inside_mask(tile, self.outline)
            known = bool(mask.all()) if mask.all() or not mask.any() else np.packbits(mask)
            with self._lock:
                self._masks[tile] = known
        return known

    def get(self, tile: mercantile.Tile) -> np.ndarray:
        """Return which of the tile's pixels are inside the outline."""
        return tiles.unpack(self.packed(tile))
