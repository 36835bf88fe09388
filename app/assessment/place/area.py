"""A resolved municipality and the map tiles an assessment of it reads."""

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

TILE_ZOOM = 12  # a z12 tile is about 10 km across at Japan's latitudes

Tile = tuple[int, int, int]


@dataclass(frozen=True)
class Area:
    """A municipality (or a ward of a designated city) with its codes, names and tiles."""

    code: str  # the 6-digit local-government code, check digit included
    code5: str
    name_ja: str
    name_kana: str
    name_romaji: str
    prefecture_ja: str
    prefecture_romaji: str
    lat: float
    lon: float
    # Left out of == and hash(): they follow from the fields above, and the resolver
    # hashes areas on every query (dict.fromkeys over its matches).
    tiles: tuple[Tile, ...] = field(compare=False)
    # A unit newer than japancode's data has no coordinates of its own there: they are
    # borrowed (location_basis names from where) and the report says so.
    approximate_location: bool = field(default=False, compare=False)
    location_basis: str = field(default="", compare=False)
    places_as_of: str = field(default="", compare=False)  # the postal data's month
    # A point's report: the circle of this radius around (lat, lon), in the unit named
    # by the fields above (its code then carries the point: "131016@35.68120,139.76710").
    # Compared: one point with two radii is two circles, and caches keyed by the area
    # (its meshes, its plan) must not serve one for the other.
    radius_m: float = 0.0
    # What was typed and what it was placed at, for a point or a street address (None for a
    # municipality): {"input", "matched", "precision": "point" | "chome" | "banchi",
    # "banchi": the 番地・号 typed after the 町丁目, "source": who placed it}. A choice may be
    # "town" (a town of several 丁目, offered by name): a question, never a place assessed.
    address: dict[str, str] | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Return the area as JSON-safe values."""
        data = asdict(self)
        data["tiles"] = [list(tile) for tile in self.tiles]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Area":
        """Rebuild an area from to_dict() output, e.g. after a JSON round trip."""
        fields = dict(data)
        fields["tiles"] = tuple((int(z), int(x), int(y)) for z, x, y in data["tiles"])
        return cls(**fields)


def tile_of(lat: float, lon: float, zoom: int = TILE_ZOOM) -> tuple[float, float]:
    """Return the fractional web-mercator tile coordinates (x, y) of a point."""
    n = 2**zoom
    x = (lon + 180.0) / 360.0 * n
    y = (1.0 - math.asinh(math.tan(math.radians(lat))) / math.pi) / 2.0 * n
    return x, y


def tiles_around(lat: float, lon: float, zoom: int = TILE_ZOOM) -> tuple[Tile, ...]:
    """Return the 2x2 block of tiles covering a one-tile box centred on the point.

    A box one tile wide always straddles exactly two tile columns and two rows, so every
    area reads the same number of tiles, which keeps job durations comparable.
    """
    x, y = tile_of(lat, lon, zoom)
    xs = (math.floor(x - 0.5), math.floor(x + 0.5))
    ys = (math.floor(y - 0.5), math.floor(y + 0.5))  # y grows southwards
    return tuple((zoom, tx, ty) for ty in ys for tx in xs)


def spot(unit: Area, lat: float, lon: float, radius_m: float, **fields: Any) -> Area:
    """Return unit as a spot's area: the point, the circle of radius_m around it, its tiles.

    The code keeps the unit's and names the point ("131016@35.68120,139.76710").
    """
    code = unit.code.split("@")[0]
    return replace(
        unit,
        code=f"{code}@{lat:.5f},{lon:.5f}",
        lat=lat,
        lon=lon,
        tiles=tiles_around(lat, lon),
        radius_m=radius_m,
        **fields,
    )
