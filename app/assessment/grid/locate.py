"""Where a point lies in a decoded tile, how far its zones lie from it, and at a coarser scale.

Pure functions of a tile's decoded classes (tiles.decode: 0 no zone, 1..n the legend's
classes, -1 unrecognised) and coordinates: no I/O, so each runs wherever decoding runs
(a thread of the job, or a process pool) and its answer is merged in the job's thread.

- pixel_of / class_at: the pixel under a point at a zoom, and its class;
- nearest: per class, the closest pixel of that class (inside the outline) to a point,
  in metres and a bearing; merge_nearest keeps the closer of two answers;
- shrink: a tile's classes at 1/factor of its resolution, the worst class of each block,
  for the report's map when an extent's pixels are more than it can carry.
"""

import math
from functools import lru_cache

import mercantile
import numpy as np

from .tiles import TILE_SIZE, centres_of

EARTH_M_PER_DEGREE = 111_320.0
COMPASS = ("N", "NE", "E", "SE", "S", "SW", "W", "NW")

# class index -> (metres, bearing in degrees clockwise from north)
Nearest = dict[int, tuple[float, float]]


def pixel_of(lat: float, lon: float, zoom: int) -> tuple[mercantile.Tile, int, int]:
    """Return the tile at zoom that holds the point, and the point's column and row in it."""
    n = 2**zoom
    x = (lon + 180.0) / 360.0 * n
    y = (1.0 - math.asinh(math.tan(math.radians(lat))) / math.pi) / 2.0 * n
    tx, ty = min(int(x), n - 1), min(int(y), n - 1)
    col = min(int((x - tx) * TILE_SIZE), TILE_SIZE - 1)
    row = min(int((y - ty) * TILE_SIZE), TILE_SIZE - 1)
    return mercantile.Tile(tx, ty, zoom), col, row


def class_at(classes: np.ndarray, col: int, row: int) -> int:
    """Return the class of the pixel at (col, row) of a decoded tile."""
    return int(classes[row, col])


def offsets_m(
    lat: float, lon: float, lats: np.ndarray, lons: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return east and north offsets in metres of points from (lat, lon) (local flat earth)."""
    east = (lons - lon) * EARTH_M_PER_DEGREE * math.cos(math.radians(lat))
    north = (lats - lat) * EARTH_M_PER_DEGREE
    return east, north


def bearing_of(east: float, north: float) -> float:
    """Return the bearing in degrees, clockwise from north, of an offset."""
    return math.degrees(math.atan2(east, north)) % 360.0


def compass(bearing: float) -> str:
    """Return the 8-point compass direction of a bearing (N, NE, ..., NW)."""
    return COMPASS[int((bearing % 360.0 + 22.5) // 45) % 8]


def nearest(
    tile: mercantile.Tile, classes: np.ndarray, inside: np.ndarray, lat: float, lon: float
) -> Nearest:
    """Return, per legend class painted inside the outline on a tile, its closest pixel."""
    painted = inside & (classes > 0)
    if not painted.any():
        return {}
    lons, lats = centres_of(tile, painted)
    east, north = offsets_m(lat, lon, lats, lons)
    distance = np.hypot(east, north)
    found = classes[painted]
    out: Nearest = {}
    for index in np.unique(found).tolist():
        where = np.flatnonzero(found == index)
        best = where[np.argmin(distance[where])]
        out[int(index)] = (float(distance[best]), bearing_of(float(east[best]), float(north[best])))
    return out


def merge_nearest(into: Nearest, other: Nearest) -> Nearest:
    """Keep, per class, the closer of two answers (into is updated and returned)."""
    for index, found in other.items():
        if index not in into or found[0] < into[index][0]:
            into[index] = found
    return into


def shrink(classes: np.ndarray, factor: int, ranks: np.ndarray) -> np.ndarray:
    """Return a tile's classes at 1/factor of its resolution: each block's worst class.

    ranks[c + 1] is the rank of class c (so -1, unrecognised, and 0, no zone, rank lowest);
    of pixels ranked alike (a landslide zone ranked as no zone), the block's first in
    reading order. factor is a power of 2.
    """
    if factor == 1:
        return classes
    size = TILE_SIZE // factor
    if not classes.any():  # nothing painted, nothing unrecognised (a tile not published)
        return np.zeros((size, size), dtype=classes.dtype)
    # One key per pixel, its rank above how early it comes in its block: a block's largest
    # key is its worst rank's first pixel. Halving the key by pairs of columns and rows
    # keeps each block's largest, in a few whole-array steps, in 16 bits where the key fits
    # (a legend's few ranks at a report's factors): half the bytes each step moves.
    bits = 2 * (factor.bit_length() - 1)
    lowest = int(ranks.min())
    dtype = np.int16 if (int(ranks.max()) - lowest + 1) << bits <= 2**15 else np.int32
    if np.array_equal(ranks, np.arange(-1, len(ranks) - 1)):  # class c ranks c: no lookup
        key = classes.astype(dtype)
        key += 1
    else:
        key = (ranks.astype(np.int64) - lowest).astype(dtype).take(classes.astype(np.intp) + 1)
    key <<= bits
    key |= _earliness(factor, dtype)
    while key.shape[0] > size:
        key = np.maximum(key[:, 0::2], key[:, 1::2])
        key = np.maximum(key[0::2], key[1::2])
    at = (factor * factor - 1) - (key & (factor * factor - 1))  # the pixel's place in its block
    corners, places = _blocks(factor)
    return classes.ravel().take(corners + places.take(at))


@lru_cache(maxsize=32)
def _earliness(factor: int, dtype: type) -> np.ndarray:
    """Return per pixel of a tile how early it comes in its block of factor x factor, as
    a number (the first pixel largest)."""
    within = np.arange(TILE_SIZE) % factor
    place = within[:, None] * factor + within[None, :]
    return (factor * factor - 1 - place).astype(dtype)


@lru_cache(maxsize=16)
def _blocks(factor: int) -> tuple[np.ndarray, np.ndarray]:
    """Return where each block of factor x factor starts in a tile's flattened pixels, and
    where each place in a block (row by row) lies from its start."""
    corner = np.arange(TILE_SIZE // factor) * factor
    place = np.arange(factor * factor)
    starts = corner[:, None] * TILE_SIZE + corner[None, :]
    return starts, place // factor * TILE_SIZE + place % factor
