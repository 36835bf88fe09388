"""The report's map: the place's outline and each layer's zones, drawn on one square.

A zone dataset's reading (tiles.Reading) keeps, per map cell, the worst class painted there;
as_answer turns it into the JSON-safe answer the analysis reads, with its cells as runs of
rectangles; mesh layers (J-SHIS) are drawn as their 250 m squares. Coordinates are of a
viewBox MAP_SIZE units a side over the outline's box (tiles.map_xy).
"""

from typing import Any

import numpy as np
from shapely.geometry.base import BaseGeometry

from ..sources import tiles
from ..sources.zones import Plan


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
