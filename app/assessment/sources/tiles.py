"""The hazard map portal's raster tiles, read pixel by pixel over a place's outline.

The portal (ハザードマップポータルサイト, https://disaportal.gsi.go.jp/) publishes each
designated-zone dataset as 256 x 256 PNG tiles at ``{base}/{id}/{z}/{x}/{y}.png``, painted
in the colours of the dataset's legend. Here a tile's bytes and an outline become counts of
pixels per legend class, for the pixels whose centres lie inside the outline only:

- a transparent pixel, or a tile the portal does not have (HTTP 404), is "no zone mapped
  here" (NO_ZONE), which is not "safe" and not "not surveyed";
- an opaque pixel whose colour is within TOLERANCE of a legend colour is that class;
- any other opaque pixel (a label, an edge blended by the renderer) is UNRECOGNISED and
  counted apart, so it never passes for a class or for "no zone".

Where the colours come from is in docs/providers.md. Tile maths (which tiles cover an
outline at which zoom) is mercantile's; point-in-outline tests are shapely's, vectorised
over pixel centres with ``contains_xy``, and only for tiles that straddle the outline.
"""

import io
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import mercantile
import numpy as np
import shapely
from PIL import Image
from shapely.geometry.base import BaseGeometry

TILE_SIZE = 256
MIN_ZOOM, MAX_ZOOM = 2, 17
TILE_BUDGET = 256  # tiles per layer dataset per job, at most
TOLERANCE = 24  # per RGB channel: renderers shift legend colours by a few units
OPAQUE = 128  # alpha at or above which a pixel is painted
NO_ZONE = "none"
UNRECOGNISED = "other"
MAP_CELLS = 48  # the report's map: the outline's box split into this many cells a side


@dataclass(frozen=True)
class ZoneClass:
    """One class of a legend: its key, colour and rank (higher is worse)."""

    key: str
    colour: str  # "#RRGGBB"
    rank: int
    label_en: str
    label_ja: str

    @property
    def rgb(self) -> tuple[int, int, int]:
        """Return the colour as (r, g, b)."""
        return tuple(int(self.colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


# Planned-maximum flood depth and tsunami depth: the portal's depth legend (new legend).
DEPTH = (
    ZoneClass("lt0.5", "#F7F5A9", 1, "under 0.5 m", "0.5m未満"),
    ZoneClass("0.5-3", "#FFD8C0", 2, "0.5 to 3 m", "0.5〜3m"),
    ZoneClass("3-5", "#FFB7B7", 3, "3 to 5 m", "3〜5m"),
    ZoneClass("5-10", "#FF9191", 4, "5 to 10 m", "5〜10m"),
    ZoneClass("10-20", "#F285C9", 5, "10 to 20 m", "10〜20m"),
    ZoneClass("ge20", "#DC7ADC", 6, "20 m or more", "20m以上"),
)


def _warning(kind: str, warning: str, special: str) -> tuple[ZoneClass, ZoneClass]:
    return (
        ZoneClass(f"{kind}_warning", warning, 1, "warning zone", "警戒区域"),
        ZoneClass(f"{kind}_special", special, 2, "special warning zone", "特別警戒区域"),
    )


LEGENDS: dict[str, tuple[ZoneClass, ...]] = {
    "01_flood_l2_shinsuishin_data": DEPTH,
    "04_tsunami_newlegend_data": DEPTH,
    "05_dosekiryukeikaikuiki": _warning("debris_flow", "#EDD86F", "#C04C63"),
    "05_kyukeishakeikaikuiki": _warning("steep_slope", "#FFED4C", "#FB684C"),
    "05_jisuberikeikaikuiki": _warning("landslide", "#FFB74C", "#CA4C95"),
}


@lru_cache(maxsize=16)
def _lookup(legend: tuple[ZoneClass, ...]) -> np.ndarray:
    """Return the class of every colour, by its top 5 bits per channel (32,768 entries).

    Each entry is classified by the centre of its 8 x 8 x 8 cube of colours, so the
    tolerance holds to within 4 units either way: a table lookup per pixel instead of a
    distance to every legend colour.
    """
    levels = np.arange(32, dtype=np.int16) * 8 + 4
    r, g, b = np.meshgrid(levels, levels, levels, indexing="ij")
    cube = np.stack([r, g, b], axis=-1).reshape(-1, 3)
    classes = np.full(len(cube), -1, dtype=np.int8)
    best = np.full(len(cube), 256, dtype=np.int16)
    for i, zone in enumerate(legend, start=1):
        distance = np.abs(cube - np.array(zone.rgb, dtype=np.int16)).max(axis=-1)
        closer = (distance <= TOLERANCE) & (distance < best)
        classes[closer] = i
        best = np.minimum(best, distance)
    return classes


def classify(rgba: np.ndarray, legend: tuple[ZoneClass, ...]) -> np.ndarray:
    """Return each pixel's class: 0 no zone, 1..n the legend's classes, -1 unrecognised."""
    top = (rgba[..., :3] >> 3).astype(np.int32)
    out = _lookup(legend)[(top[..., 0] << 10) | (top[..., 1] << 5) | top[..., 2]]
    out[rgba[..., 3] < OPAQUE] = 0
    return out


def decode(png: bytes | None, legend: tuple[ZoneClass, ...]) -> np.ndarray:
    """Return the class of every pixel of a tile (None: the portal has no such tile)."""
    if png is None:
        return np.zeros((TILE_SIZE, TILE_SIZE), dtype=np.int8)
    with Image.open(io.BytesIO(png)) as image:
        rgba = np.asarray(image.convert("RGBA"))
    if rgba.shape[:2] != (TILE_SIZE, TILE_SIZE):
        raise ValueError(f"a tile is {TILE_SIZE} pixels square, not {rgba.shape[:2]}")
    return classify(rgba, legend)


def pixel_centres(tile: mercantile.Tile) -> tuple[np.ndarray, np.ndarray]:
    """Return the longitudes and latitudes of a tile's pixel centres (each 256 x 256)."""
    n = 2**tile.z
    steps = (np.arange(TILE_SIZE) + 0.5) / TILE_SIZE
    lon = (tile.x + steps) / n * 360.0 - 180.0
    lat = np.degrees(np.arctan(np.sinh(np.pi * (1 - 2 * (tile.y + steps) / n))))
    return np.meshgrid(lon, lat)


def inside_mask(tile: mercantile.Tile, outline: BaseGeometry) -> np.ndarray:
    """Return which pixels of a tile have their centre inside the outline."""
    box = shapely.box(*mercantile.bounds(tile))
    if outline.contains(box):
        return np.ones((TILE_SIZE, TILE_SIZE), dtype=bool)
    part = outline.intersection(box)
    if part.is_empty:
        return np.zeros((TILE_SIZE, TILE_SIZE), dtype=bool)
    shapely.prepare(part)
    lon, lat = pixel_centres(tile)
    return shapely.contains_xy(part, lon, lat)


def covering(outline: BaseGeometry, zoom: int) -> list[mercantile.Tile]:
    """Return the tiles at zoom that the outline touches."""
    shapely.prepare(outline)
    return [
        tile
        for tile in mercantile.tiles(*outline.bounds, zooms=zoom)
        if outline.intersects(shapely.box(*mercantile.bounds(tile)))
    ]


def zoom_for(outline: BaseGeometry, budget: int = TILE_BUDGET) -> int:
    """Return the deepest zoom at which the outline's tiles fit the budget."""
    west, south, east, north = outline.bounds
    for zoom in range(MAX_ZOOM, MIN_ZOOM - 1, -1):
        # The box's tile count bounds the outline's: count precisely only when it may fit.
        low = mercantile.tile(west, north, zoom)
        high = mercantile.tile(east, south, zoom)
        boxed = (high.x - low.x + 1) * (high.y - low.y + 1)
        if boxed <= budget or (boxed <= 4 * budget and len(covering(outline, zoom)) <= budget):
            return zoom
    return MIN_ZOOM


def tile_key(tile: mercantile.Tile) -> str:
    """Return the "z/x/y" key of a tile."""
    return f"{tile.z}/{tile.x}/{tile.y}"


def parse_tile_key(key: str) -> mercantile.Tile:
    """Read a "z/x/y" key back, refusing anything else."""
    z, x, y = (int(part) for part in key.split("/"))
    if not (MIN_ZOOM <= z <= MAX_ZOOM and 0 <= x < 2**z and 0 <= y < 2**z):
        raise ValueError(f"not a tile: {key!r}")
    return mercantile.Tile(x, y, z)


def map_xy(bounds: tuple[float, float, float, float], lon: Any, lat: Any) -> tuple[Any, Any]:
    """Place points on the report's square map of an outline's box: 0 to 1 each way.

    Longitude is shrunk by the cosine of the box's middle latitude, so shapes keep their
    proportions; the longer side of the box spans the map.
    """
    west, south, east, north = bounds
    k = math.cos(math.radians((south + north) / 2))
    span = max((east - west) * k, north - south) or 1e-9
    return (lon - west) * k / span, (north - lat) / span


@dataclass
class Reading:
    """What one dataset's tiles say over an outline: pixel counts and a coarse map."""

    legend: tuple[ZoneClass, ...]
    bounds: tuple[float, float, float, float]  # the outline's (west, south, east, north)
    counts: dict[str, int]
    cells: dict[int, int]  # map cell (row * MAP_CELLS + col) -> the worst class index there
    tiles: int = 0
    missing: int = 0  # tiles the portal does not have (404): no zone mapped there

    @classmethod
    def start(cls, legend: tuple[ZoneClass, ...], outline: BaseGeometry) -> "Reading":
        """Return an empty reading of a dataset over an outline."""
        counts = {zone.key: 0 for zone in legend} | {NO_ZONE: 0, UNRECOGNISED: 0}
        return cls(legend, tuple(outline.bounds), counts, {})  # type: ignore[arg-type]

    def add(self, tile: mercantile.Tile, classes: np.ndarray, inside: np.ndarray) -> None:
        """Count a decoded tile's pixels inside the outline, and note them on the map."""
        self.tiles += 1
        picked = classes[inside]
        self.counts[NO_ZONE] += int((picked == 0).sum())
        self.counts[UNRECOGNISED] += int((picked == -1).sum())
        for i, zone in enumerate(self.legend, start=1):
            self.counts[zone.key] += int((picked == i).sum())
        painted = inside & (classes > 0)
        if not painted.any():
            return
        lon, lat = pixel_centres(tile)
        x, y = map_xy(self.bounds, lon[painted], lat[painted])
        cols = np.clip((x * MAP_CELLS).astype(int), 0, MAP_CELLS - 1)
        rows = np.clip((y * MAP_CELLS).astype(int), 0, MAP_CELLS - 1)
        ranks = np.array([0] + [zone.rank for zone in self.legend])[classes[painted]]
        for cell, rank in zip((rows * MAP_CELLS + cols).tolist(), ranks.tolist(), strict=True):
            if rank > self.cells.get(cell, 0):
                self.cells[cell] = rank

    def total(self) -> int:
        """Return the number of pixels read inside the outline."""
        return sum(self.counts.values())

    def shares(self) -> dict[str, float]:
        """Return each class's share of the pixels inside the outline, 0 to 1."""
        total = self.total()
        return {key: (count / total if total else 0.0) for key, count in self.counts.items()}


def read_tiles(
    legend: tuple[ZoneClass, ...],
    outline: BaseGeometry,
    tiles: Iterable[tuple[mercantile.Tile, bytes | None]],
    masks: Mapping[mercantile.Tile, np.ndarray] | None = None,
) -> Reading:
    """Read (tile, PNG bytes or None) pairs over an outline (for tests and the bench)."""
    reading = Reading.start(legend, outline)
    for tile, png in tiles:
        inside = masks[tile] if masks is not None else inside_mask(tile, outline)
        reading.add(tile, decode(png, legend), inside)
        reading.missing += png is None
    return reading


def metres_per_pixel(zoom: int, lat: float) -> float:
    """Return the ground size of one pixel at a zoom and latitude."""
    return 40_075_016.686 * math.cos(math.radians(lat)) / (TILE_SIZE * 2**zoom)
