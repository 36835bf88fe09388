"""The hazard map portal's raster tiles, read pixel by pixel over a place's outline.

The portal (ハザードマップポータルサイト, https://disaportal.gsi.go.jp/) publishes each
designated-zone dataset as 256 x 256 PNG tiles, painted in the colours of the dataset's
legend (legends.py: one table per dataset, each colour with the legend image it was read
from). Here a tile's bytes and an outline become counts of pixels per legend class, for
the pixels whose centres lie inside the outline only:

- a transparent pixel, or a tile the portal does not have (HTTP 404), is "no zone mapped
  here" (NO_ZONE), which is not "safe" and not "not surveyed";
- a painted pixel whose colour is the nearest legend colour within tolerance(legend) is
  that class (classify: the one function where colours meet a legend); an edge at
  partial alpha counts in its class;
- any other painted pixel is UNRECOGNISED and counted apart: it never passes for a class
  or for "no zone", and a layer with more than UNKNOWN_LIMIT of them is not read at all;
- of those, a pixel that is not an anti-aliased edge (is_edge: a blend of two legend
  colours, beside a pixel of a class) is a colour of no known class, "stray": it could be
  any class, the worst too, so a layer with some makes its level uncertain, however few.

Tile maths (which tiles cover an outline at which zoom) is mercantile's; point-in-outline
tests are shapely's, vectorised over pixel centres with ``contains_xy``, and only for
tiles that straddle the outline.
"""

import io
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import mercantile
import numpy as np
import shapely
from PIL import Image
from shapely.geometry.base import BaseGeometry

from .legends import BORDER_BLUE, BORDER_COLOUR, BORDER_DARK, ZoneClass, zones_of

TILE_SIZE = 256
MIN_ZOOM, MAX_ZOOM = 2, 17
TILE_BUDGET = 256  # tiles per layer dataset per job, at most
NO_ZONE = "none"
UNRECOGNISED = "other"
UNKNOWN_LIMIT = 0.05  # a layer whose painted pixels are more than this unknown is unread
# A legend of one colour has no two colours to keep apart: a pixel within this of it (a
# landslide legend's tolerance) is of its class.
SINGLE_TOLERANCE = 24


def distance(a: Any, b: Any) -> Any:
    """Return the largest per-channel difference between colours (the matching metric)."""
    return np.abs(np.asarray(a, dtype=np.int16) - np.asarray(b, dtype=np.int16)).max(axis=-1)


@lru_cache(maxsize=16)
def tolerance(legend: tuple[ZoneClass, ...]) -> int:
    """Return how far a colour may stray from its class: below half the closest two apart.

    So no colour is ever within tolerance of two classes, whichever two they are.
    """
    colours = [zone.rgb for zone in zones_of(legend)]
    if len(colours) < 2:
        return SINGLE_TOLERANCE
    closest = min(int(distance(a, b)) for i, a in enumerate(colours) for b in colours[i + 1 :])
    return (closest - 1) // 2


def _match(rgb: np.ndarray, legend: tuple[ZoneClass, ...]) -> np.ndarray:
    """Return each colour's class (1..n by legend order), or -1: the nearest within tolerance."""
    zones = zones_of(legend)
    palette = np.array([zone.rgb for zone in zones], dtype=np.int16)
    far = distance(rgb[:, None, :], palette[None, :, :])  # colours x classes
    nearest = far.argmin(axis=1)
    index = np.array([legend.index(zone) + 1 for zone in zones])[nearest]
    return np.where(far.min(axis=1) <= tolerance(legend), index, -1)


def classify(rgba: np.ndarray, legend: tuple[ZoneClass, ...]) -> np.ndarray:
    """Return each pixel's class: 0 no zone, 1..n the legend's classes, -1 unrecognised.

    The one place colours meet a legend: any array of RGBA (a tile, or a palette's
    entries) in, its classes out. A transparent pixel is no zone; any other is matched to
    the nearest legend colour within tolerance(legend); an edge drawn at partial alpha
    counts in its class whether its colour was kept (straight alpha) or faded toward
    black (premultiplied); a legend with a border class takes dark-blue pixels as it.
    """
    rgba = np.asarray(rgba, dtype=np.uint8)
    flat = rgba.reshape(-1, 4)
    out = np.zeros(len(flat), dtype=np.int8)
    painted = flat[:, 3] > 0
    if not painted.any():
        return out.reshape(rgba.shape[:-1])
    # Tiles hold few distinct colours: match each once.
    packed = flat[painted].astype(np.uint32)
    packed = (packed[:, 0] << 24) | (packed[:, 1] << 16) | (packed[:, 2] << 8) | packed[:, 3]
    colours, inverse = np.unique(packed, return_inverse=True)
    parts = np.stack([(colours >> s) & 0xFF for s in (24, 16, 8, 0)], axis=1).astype(np.int16)
    rgb, alpha = parts[:, :3], parts[:, 3]
    found = _match(rgb, legend)
    faded = (found == -1) & (alpha < 255)
    if faded.any():
        restored = np.clip(rgb[faded] * 255 // alpha[faded, None], 0, 255)
        found[faded] = _match(restored, legend)
    borders = [i for i, zone in enumerate(legend, start=1) if zone.border]
    if borders:
        blue = (rgb[:, 2] - np.maximum(rgb[:, 0], rgb[:, 1]) >= BORDER_BLUE) & (
            rgb[:, 0] <= BORDER_DARK
        )
        found[(found == -1) & blue] = borders[0]
    out[painted] = found[inverse.ravel()].astype(np.int8)
    return out.reshape(rgba.shape[:-1])


def read_rgba(png: bytes) -> np.ndarray:
    """Return a PNG tile's pixels as a 256 x 256 x 4 array, refusing other sizes."""
    with Image.open(io.BytesIO(png)) as image:
        rgba = np.asarray(image.convert("RGBA"))
    if rgba.shape[:2] != (TILE_SIZE, TILE_SIZE):
        raise ValueError(f"a tile is {TILE_SIZE} pixels square, not {rgba.shape[:2]}")
    return rgba


def decode(png: bytes | None, legend: tuple[ZoneClass, ...]) -> np.ndarray:
    """Return the class of every pixel of a tile (None: the portal has no such tile)."""
    if png is None:
        return np.zeros((TILE_SIZE, TILE_SIZE), dtype=np.int8)
    return classify(read_rgba(png), legend)


def unknown_colours(png: bytes, classes: np.ndarray, inside: np.ndarray) -> dict[str, int]:
    """Return the colours (#RRGGBBAA) of a tile's unrecognised pixels inside, with counts."""
    rgba = read_rgba(png)[(classes == -1) & inside]
    seen: dict[str, int] = {}
    for r, g, b, a in rgba.tolist():
        colour = f"#{r:02X}{g:02X}{b:02X}{a:02X}"
        seen[colour] = seen.get(colour, 0) + 1
    return seen


EDGE_TOLERANCE = 6  # how far (largest channel) an edge's colour may stray from a blend


@lru_cache(maxsize=4096)
def is_edge(rgba: tuple[int, int, int, int], legend: tuple[ZoneClass, ...]) -> bool:
    """Tell whether a colour is a blend of two of the legend's colours, as edges are drawn.

    Its own colour, or (at partial alpha) that colour undone from black, must lie within
    EDGE_TOLERANCE of the segment between two legend colours (a planned zone's border
    among them): where two classes meet, an anti-aliased pixel mixes them. Kept per
    process (about 1 ms a colour; a dataset's tiles share their edge colours).
    """
    r, g, b, alpha = (int(v) for v in rgba)
    candidates = [np.array((r, g, b), dtype=float)]
    if 0 < alpha < 255:
        candidates.append(np.clip(candidates[0] * 255 / alpha, 0, 255))
    palette = [np.array(zone.rgb, dtype=float) for zone in zones_of(legend)]
    if any(zone.border for zone in legend):
        palette.append(np.array(ZoneClass("", BORDER_COLOUR, 0, "", "").rgb, dtype=float))
    for colour in candidates:
        for i, start in enumerate(palette):
            for end in palette[i + 1 :]:
                step = end - start
                t = float(np.clip(np.dot(colour - start, step) / np.dot(step, step), 0, 1))
                if np.abs(colour - (start + t * step)).max() <= EDGE_TOLERANCE:
                    return True
    return False


def stray_colours(
    png: bytes, classes: np.ndarray, inside: np.ndarray, legend: tuple[ZoneClass, ...]
) -> dict[str, int]:
    """Return the colours (#RRGGBBAA) of unrecognised pixels inside that are not edges.

    An edge is a blend of two legend colours (is_edge) beside a pixel of a class; any
    other unrecognised colour is of no known class, and the layer's level is uncertain.
    """
    rgba = read_rgba(png)
    known = np.pad(classes > 0, 1)
    beside = known[:-2, 1:-1] | known[2:, 1:-1] | known[1:-1, :-2] | known[1:-1, 2:]
    stray: dict[str, int] = {}
    unknown = (classes == -1) & inside
    for (r, g, b, a), near in zip(rgba[unknown].tolist(), beside[unknown].tolist(), strict=True):
        if not (near and is_edge((r, g, b, a), legend)):
            key = f"#{r:02X}{g:02X}{b:02X}{a:02X}"
            stray[key] = stray.get(key, 0) + 1
    return stray


def merge(first: np.ndarray, second: np.ndarray, legend: tuple[ZoneClass, ...]) -> np.ndarray:
    """Return one tile's classes from two sources of it (two prefectures): the worse wins.

    A pixel painted in one and transparent in the other keeps its paint; painted in both,
    the class of higher rank; an unrecognised colour in either stays unrecognised.
    """
    ranks = np.array([-1, 0] + [zone.rank + 1 for zone in legend])  # index: class + 1
    out = np.where(ranks[second + 1] > ranks[first + 1], second, first)
    out[(first == -1) | (second == -1)] = -1
    return out.astype(np.int8)


def pixel_axes(tile: mercantile.Tile) -> tuple[np.ndarray, np.ndarray]:
    """Return the longitude of each column's pixel centres and the latitude of each row's."""
    n = 2**tile.z
    steps = (np.arange(TILE_SIZE) + 0.5) / TILE_SIZE
    lon = (tile.x + steps) / n * 360.0 - 180.0
    lat = np.degrees(np.arctan(np.sinh(np.pi * (1 - 2 * (tile.y + steps) / n))))
    return lon, lat


def pixel_centres(tile: mercantile.Tile) -> tuple[np.ndarray, np.ndarray]:
    """Return the longitudes and latitudes of a tile's pixel centres (each 256 x 256)."""
    return np.meshgrid(*pixel_axes(tile))


def centres_of(tile: mercantile.Tile, pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the longitudes and latitudes of some pixels' centres (a mask over the tile)."""
    rows, cols = np.nonzero(pixels)  # in the order a mask picks them: row by row
    lon, lat = pixel_axes(tile)
    return lon[cols], lat[rows]


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


def _touching(outline: BaseGeometry, tiles: Iterable[mercantile.Tile]) -> list[mercantile.Tile]:
    return [t for t in tiles if outline.intersects(shapely.box(*mercantile.bounds(t)))]


def _descend(outline: BaseGeometry, zoom: int, budget: int | None = None):
    """Yield (zoom, the tiles the outline touches there) from MIN_ZOOM down to zoom.

    A tile touches the outline only if its parent does, so each level is found among the
    children of the one above: the cost follows the tiles touched, not the outline's box
    (a municipality of scattered islands has a box of thousands of empty tiles). Stops
    after the first level past budget, if one is given.
    """
    shapely.prepare(outline)
    level = _touching(outline, mercantile.tiles(*outline.bounds, zooms=MIN_ZOOM))
    yield MIN_ZOOM, level
    for z in range(MIN_ZOOM + 1, zoom + 1):
        if budget is not None and len(level) > budget:
            return
        level = _touching(outline, (c for t in level for c in mercantile.children(t)))
        yield z, level


def covering(outline: BaseGeometry, zoom: int) -> list[mercantile.Tile]:
    """Return the tiles at zoom that the outline touches."""
    *_, (_, deepest) = _descend(outline, zoom)
    return sorted(deepest, key=lambda t: (t.y, t.x))


def zoom_for(outline: BaseGeometry, budget: int = TILE_BUDGET) -> int:
    """Return the deepest zoom at which the outline's tiles, counted exactly, fit the budget."""
    best = MIN_ZOOM
    for zoom, level in _descend(outline, MAX_ZOOM, budget):
        if len(level) <= budget:
            best = zoom
    return best


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
    """What one dataset's tiles say over an outline: pixel counts and colours."""

    legend: tuple[ZoneClass, ...]
    bounds: tuple[float, float, float, float]  # the outline's (west, south, east, north)
    counts: dict[str, int]
    tiles: int = 0
    missing: int = 0  # tiles the portal does not have (404): no zone mapped there
    unknown: dict[str, int] = field(default_factory=dict)  # colour seen -> pixels
    stray: dict[str, int] = field(default_factory=dict)  # of those, not edges -> pixels

    @classmethod
    def start(cls, legend: tuple[ZoneClass, ...], outline: BaseGeometry) -> "Reading":
        """Return an empty reading of a dataset over an outline."""
        counts = {zone.key: 0 for zone in legend} | {NO_ZONE: 0, UNRECOGNISED: 0}
        return cls(legend, tuple(outline.bounds), counts)  # type: ignore[arg-type]

    def add(self, classes: np.ndarray, inside: np.ndarray) -> None:
        """Count a decoded tile's pixels inside the outline."""
        self.take(count(classes, inside, len(self.legend)))

    def take(self, counted: list[int]) -> None:
        """Add a tile's counts (count(): unrecognised, no zone, then each class) to it."""
        self.tiles += 1
        self.counts[UNRECOGNISED] += counted[0]
        self.counts[NO_ZONE] += counted[1]
        for i, zone in enumerate(self.legend, start=2):
            self.counts[zone.key] += counted[i]

    def total(self) -> int:
        """Return the number of pixels read inside the outline."""
        return sum(self.counts.values())

    def unknown_share(self) -> float:
        """Return the unrecognised share of the painted pixels inside (0 when none is)."""
        painted = self.total() - self.counts[NO_ZONE]
        return self.counts[UNRECOGNISED] / painted if painted else 0.0

    def unreadable(self) -> bool:
        """Say whether too many painted pixels are of no legend colour to read the layer."""
        return self.unknown_share() > UNKNOWN_LIMIT

    def shares(self) -> dict[str, float]:
        """Return each class's share of the pixels inside the outline, 0 to 1."""
        total = self.total()
        return {key: (count / total if total else 0.0) for key, count in self.counts.items()}


def count(classes: np.ndarray, inside: np.ndarray, n: int) -> list[int]:
    """Return a tile's pixels inside per class: [unrecognised, no zone, class 1 .. n]."""
    if not classes.any():  # nothing painted, nothing unrecognised (a tile not published)
        return [0, int(np.count_nonzero(inside))] + [0] * n
    return np.bincount(classes[inside] + 1, minlength=n + 2).tolist()


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
        classes = decode(png, legend)
        reading.add(classes, inside)
        reading.missing += png is None
        if png is not None and (classes[inside] == -1).any():
            for colour, n in unknown_colours(png, classes, inside).items():
                reading.unknown[colour] = reading.unknown.get(colour, 0) + n
            for colour, n in stray_colours(png, classes, inside, legend).items():
                reading.stray[colour] = reading.stray.get(colour, 0) + n
    return reading


def metres_per_pixel(zoom: int, lat: float) -> float:
    """Return the ground size of one pixel at a zoom and latitude."""
    return 40_075_016.686 * math.cos(math.radians(lat)) / (TILE_SIZE * 2**zoom)


def unpack(known: Any) -> np.ndarray:
    """Return a mask kept by zones.Masks.packed as 256 x 256 bools."""
    if isinstance(known, bool):
        return np.full((TILE_SIZE, TILE_SIZE), known, dtype=bool)
    return np.unpackbits(known)[: TILE_SIZE**2].reshape(TILE_SIZE, -1).astype(bool)
