"""The report's map: the place's outline and each layer's zones, drawn on one square.

A zone dataset's classes are kept as read, shrunk to a raster (ZoneRaster) drawn as a
palette PNG; as_answer turns a dataset's reading (tiles.Reading) into the JSON-safe answer
the analysis reads (stored reports from before rasters keep their coarse cells as
rectangles); mesh layers (J-SHIS) are drawn as their 250 m squares. Coordinates are of a
viewBox MAP_SIZE units a side over the outline's box (tiles.map_xy).
"""

from typing import Any

import numpy as np
from shapely.geometry.base import BaseGeometry

from ..grid import legends, tiles
from ..grid.zones import Plan


def as_answer(reading: tiles.Reading, zone_plan: Plan) -> dict[str, Any]:
    """Return a dataset's reading as the JSON-safe answer the analysis reads."""
    return {
        "counts": dict(reading.counts),
        "tiles": reading.tiles,
        "missing_tiles": reading.missing,
        # Colours of no legend class that are not edges (pixels each): the level is uncertain.
        "stray": dict(reading.stray),
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


def mesh_rects(
    bounds: tuple[float, float, float, float], classes: dict[str, str], ranks: dict[str, int]
) -> list[list[int]]:
    """Return the meshes read as [x, y, width, height, rank] squares on the report's map."""
    from ..grid.sampling import MESH_LAT, MESH_LON, mesh_centre

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


# The zones as read: one raster per dataset over the extent's box, at the zoom the tiles
# were read (halved, by the worst class of each block, only past RASTER_MAX pixels a side),
# stored as a palette PNG (a few kilobytes: few colours, large runs) in a data: URI, so the
# report keeps, prints and opens offline under the CSP (img-src data:).
RASTER_MAX = 1280  # a 500 m circle read at zoom 17 stays whole anywhere in Japan (<= 1,190)


def _global_px(lon: float, lat: float, zoom: int) -> tuple[float, float]:
    n = TILE * 2**zoom
    x = (lon + 180.0) / 360.0 * n
    y = (1.0 - np.arcsinh(np.tan(np.radians(lat))) / np.pi) / 2.0 * n
    return float(x), float(y)


def _lonlat(x: float, y: float, zoom: int) -> tuple[float, float]:
    n = TILE * 2**zoom
    lon = x / n * 360.0 - 180.0
    lat = float(np.degrees(np.arctan(np.sinh(np.pi * (1 - 2 * y / n)))))
    return lon, lat


TILE = tiles.TILE_SIZE


def png_uri(image: Any) -> str:
    """Return a Pillow image as a PNG data: URI."""
    import base64
    import io

    out = io.BytesIO()
    image.save(out, "PNG")  # zlib level 6: 4x quicker than optimize=True, 8 % larger
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode("ascii")


class ZoneRaster:
    """One dataset's classes over an extent's box, at the zoom (or a power-of-2 fraction)."""

    def __init__(self, legend: tuple[legends.ZoneClass, ...], bounds: Any, zoom: int) -> None:
        west, south, east, north = bounds
        x0, y0 = _global_px(west, north, zoom)
        x1, y1 = _global_px(east, south, zoom)
        self.factor = 1
        while max(x1 - x0, y1 - y0) / self.factor > RASTER_MAX and self.factor < TILE:
            self.factor *= 2
        self.legend, self.zoom = legend, zoom
        self.x0, self.y0 = int(x0) // self.factor, int(y0) // self.factor
        width = int(x1) // self.factor - self.x0 + 1
        height = int(y1) // self.factor - self.y0 + 1
        self.classes = np.zeros((height, width), dtype=np.int8)
        # ranks[c + 1]: the rank of class c, unrecognised (-1) and no zone (0) lowest
        self.ranks = np.array([-1, 0] + [zone.rank for zone in legend], dtype=np.int16)

    def add(self, tile: Any, small: np.ndarray) -> None:
        """Put a tile's classes (already shrunk by self.factor) in their place."""
        if not small.any():  # no zone: the raster is all no zone until a tile says otherwise
            return
        size = small.shape[0]
        left, top = tile.x * size - self.x0, tile.y * size - self.y0
        height, width = self.classes.shape
        a, b = max(0, -top), min(size, height - top)
        c, d = max(0, -left), min(size, width - left)
        if a < b and c < d:
            self.classes[top + a : top + b, left + c : left + d] = small[a:b, c:d]

    def bounds(self) -> list[float]:
        """Return the raster's (west, south, east, north) edges."""
        height, width = self.classes.shape
        f = self.factor
        west, north = _lonlat(self.x0 * f, self.y0 * f, self.zoom)
        east, south = _lonlat((self.x0 + width) * f, (self.y0 + height) * f, self.zoom)
        return [round(v, 7) for v in (west, south, east, north)]

    def drawn(self) -> dict[str, Any] | None:
        """Return the raster as a palette PNG data: URI with its edges (None: no zone)."""
        from PIL import Image

        if not (self.classes > 0).any():
            return None
        image = Image.fromarray(np.clip(self.classes, 0, None).astype(np.uint8), "P")
        palette = [0, 0, 0] + [v for zone in self.legend for v in zone.rgb]
        image.putpalette(palette)
        image.info["transparency"] = 0
        metres = tiles.metres_per_pixel(self.zoom, self.bounds()[3]) * self.factor
        return {"png": png_uri(image), "bounds": self.bounds(), "metres_per_pixel": metres}


def view_box(bounds: Any, margin: float = 10.0) -> tuple[float, float, float, float]:
    """Return the (west, south, east, north) the report's map shows: its viewBox in degrees."""
    west, south, east, north = bounds
    k = float(np.cos(np.radians((south + north) / 2)))
    span = max((east - west) * k, north - south) or 1e-9
    _, h = tiles.map_xy(bounds, np.array([west]), np.array([south]))
    unit = span / MAP_SIZE  # degrees of latitude per map unit
    right = (MAP_SIZE + margin) * unit / k + west
    bottom = north - (float(h[0]) * MAP_SIZE + margin) * unit
    return west - margin * unit / k, bottom, right, north + margin * unit


def base_map(box: Any, zoom: int, pngs: dict[Any, bytes | None], width: int = 1024) -> str:
    """Return the base map's tiles cropped to the box as one PNG data: URI (pure: bytes in).

    A tile missing (None) is left white. The picture is at most width pixels wide and is
    reduced to 64 colours: the pale map is mostly flat tints, so it stays small.
    """
    import io

    from PIL import Image

    west, south, east, north = box
    x0, y0 = (int(v) for v in _global_px(west, north, zoom))
    x1, y1 = (int(v) for v in _global_px(east, south, zoom))
    # Each tile pasted straight into the crop (no mosaic of whole tiles first): the
    # picture's memory is the crop's alone.
    picture = Image.new("RGB", (x1 - x0, y1 - y0), "white")
    for tile, png in pngs.items():
        if png is None:
            continue
        with Image.open(io.BytesIO(png)) as piece:
            picture.paste(piece.convert("RGB"), (tile.x * TILE - x0, tile.y * TILE - y0))
    if picture.width > width:
        picture = picture.resize((width, max(1, round(picture.height * width / picture.width))))
    return png_uri(picture.quantize(64))


def spot_xy(bounds: Any, lat: float, lon: float) -> list[float]:
    """Return a point's place on the report's map, in map units."""
    x, y = tiles.map_xy(bounds, np.array([lon]), np.array([lat]))
    return [round(float(x[0]) * MAP_SIZE, 1), round(float(y[0]) * MAP_SIZE, 1)]


def image_rect(bounds: Any, edges: Any) -> list[float]:
    """Return where a picture with these (west, south, east, north) edges sits on the map."""
    west, south, east, north = edges
    xs, ys = tiles.map_xy(bounds, np.array([west, east]), np.array([north, south]))
    x, y = float(xs[0]) * MAP_SIZE, float(ys[0]) * MAP_SIZE
    w, h = float(xs[1]) * MAP_SIZE - x, float(ys[1]) * MAP_SIZE - y
    return [round(x, 1), round(y, 1), round(w, 1), round(h, 1)]


NICE_METRES = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000)


def scale_bar(bounds: Any) -> dict[str, Any]:
    """Return a scale bar about a fifth of the map wide: its length in metres and map units."""
    west, south, east, north = bounds
    k = float(np.cos(np.radians((south + north) / 2)))
    span_m = max((east - west) * k, north - south) * 111_320.0 or 1.0
    per_unit = span_m / MAP_SIZE
    metres = max((m for m in NICE_METRES if m / per_unit <= MAP_SIZE / 4), default=10)
    label = f"{metres // 1000} km" if metres >= 1000 else f"{metres} m"
    return {"metres": metres, "units": round(metres / per_unit, 1), "label": label}
