"""Which tiles an assessment reads for an area, and which of their pixels are the area's.

plan(area) is the area's outline (or a point's circle), the deepest zoom at which the
tiles touching it fit the per-dataset budget, and those tiles; every zone dataset of a
job reads the same tiles, so a job's masks (pixels inside the outline) are computed once
per tile and shared by its layers (Masks), kept packed, and only for straddling tiles.
"""

import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import mercantile
import numpy as np
from shapely.geometry.base import BaseGeometry

from ..place.outlines import Outline, outline_of
from . import tiles

DEFAULT_TILE_BUDGET = 64
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

    @property
    def keys(self) -> list[str]:
        """Return the tiles' "z/x/y" keys."""
        return [tiles.tile_key(tile) for tile in self.tiles]

    def describe(self) -> dict[str, Any]:
        """Return what the report says about the extent and the zoom."""
        lat = (self.outline.geometry.bounds[1] + self.outline.geometry.bounds[3]) / 2
        return {
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
    return Plan(outline, zoom, tuple(tiles.covering(outline.geometry, zoom)), budget)


def plan(area: Any) -> Plan:
    """Return the area's plan (cached: every dataset and job of one area asks the same)."""
    return _plan(area, getattr(area, "radius_m", 0.0), _settings["budget"])


class Masks:
    """One job's inside-the-outline masks, per tile, computed once and kept packed."""

    def __init__(self, outline: BaseGeometry) -> None:
        self.outline = outline
        self._lock = threading.Lock()
        self._masks: dict[mercantile.Tile, Any] = {}

    def get(self, tile: mercantile.Tile) -> np.ndarray:
        """Return which of the tile's pixels are inside the outline."""
        with self._lock:
            known = self._masks.get(tile)
        if known is None:
            mask = tiles.inside_mask(tile, self.outline)
            known = bool(mask.all()) if mask.all() or not mask.any() else np.packbits(mask)
            with self._lock:
                self._masks[tile] = known
        if isinstance(known, bool):
            return np.full((tiles.TILE_SIZE, tiles.TILE_SIZE), known, dtype=bool)
        return np.unpackbits(known)[: tiles.TILE_SIZE**2].reshape(tiles.TILE_SIZE, -1).astype(bool)


def as_answer(reading: tiles.Reading, zone_plan: Plan) -> dict[str, Any]:
    """Return a dataset's reading as the JSON-safe answer the analysis reads."""
    return {
        "counts": dict(reading.counts),
        "rects": map_rects(reading.cells),
        "tiles": reading.tiles,
        "missing_tiles": reading.missing,
        "bounds": [round(v, 6) for v in reading.bounds],
        **zone_plan.describe(),
    }


MAP_SIZE = 1000  # the report's map: a square viewBox this many units a side


def map_outline(outline: BaseGeometry) -> dict[str, Any]:
    """Return the outline as an SVG path on the report's map, with the map's height."""
    import shapely

    bounds = outline.bounds
    step = 1.0 / 400  # of the map: finer detail is not visible
    _, h = tiles.map_xy(bounds, np.array([bounds[0]]), np.array([bounds[1]]))
    west, south, east, north = bounds
    k = np.cos(np.radians((south + north) / 2))
    span = max((east - west) * k, north - south)
    simple = shapely.simplify(outline, step * span, preserve_topology=True)
    parts = []
    for polygon in getattr(simple, "geoms", [simple]):
        if polygon.geom_type != "Polygon":
            continue
        for ring in [polygon.exterior, *polygon.interiors]:
            xy = np.asarray(ring.coords)
            x, y = tiles.map_xy(bounds, xy[:, 0], xy[:, 1])
            pairs = zip(x * MAP_SIZE, y * MAP_SIZE, strict=True)
            points = " ".join(f"{a:.0f},{b:.0f}" for a, b in pairs)
            parts.append(f"M{points}Z")
    return {"path": "".join(parts), "width": MAP_SIZE, "height": round(float(h[0]) * MAP_SIZE)}


def map_rects(cells: dict[Any, int]) -> list[list[int]]:
    """Return a reading's map cells as [x, y, width, height, rank] runs along each row."""
    size = MAP_SIZE / tiles.MAP_CELLS
    rows: dict[int, list[tuple[int, int]]] = {}
    for cell, rank in cells.items():
        row, col = divmod(int(cell), tiles.MAP_CELLS)
        rows.setdefault(row, []).append((col, rank))
    rects = []
    for row, cols in sorted(rows.items()):
        cols.sort()
        start, last, rank = cols[0][0], cols[0][0], cols[0][1]
        for col, r in [*cols[1:], (None, None)]:
            if col is not None and col == last + 1 and r == rank:
                last = col
                continue
            x, w = round(start * size), round((last - start + 1) * size)
            rects.append([x, round(row * size), w, round(size), rank])
            if col is not None:
                start, last, rank = col, col, r
    return rects


def mesh_rects(
    bounds: tuple[float, float, float, float], classes: dict[str, str], ranks: dict[str, int]
) -> list[list[int]]:
    """Return the meshes read as [x, y, width, height, rank] squares on the report's map."""
    from ..place.sampling import MESH_LAT, MESH_LON, mesh_centre

    rects = []
    for mesh, key in sorted(classes.items()):
        if key not in ranks:
            continue
        lat, lon = mesh_centre(mesh)
        xs, ys = tiles.map_xy(
            bounds,
            np.array([lon - MESH_LON / 2, lon + MESH_LON / 2]),
            np.array([lat + MESH_LAT / 2, lat - MESH_LAT / 2]),
        )
        x, y = round(float(xs[0]) * MAP_SIZE), round(float(ys[0]) * MAP_SIZE)
        w = max(1, round(float(xs[1] - xs[0]) * MAP_SIZE))
        h = max(1, round(float(ys[1] - ys[0]) * MAP_SIZE))
        rects.append([x, y, w, h, ranks[key]])
    return rects
