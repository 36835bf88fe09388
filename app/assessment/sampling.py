"""Where in a municipality the real services are asked: a few representative points.

A municipality's figures come from its centroid and the centres of the four quadrants of
the one-tile box around it (the box the area's z12 tiles cover, about 10 km across), so a
report can say "worst of 5 points" instead of trusting one spot. The points are fixed per
area, so two jobs for one place ask the services the same questions and share the cache.
"""

import math

from .area import TILE_ZOOM, Area

MAX_POINTS = 5
QUADRANT = 0.25  # of a tile: the quadrant centres of a one-tile box around the centroid

Point = tuple[float, float]  # (lat, lon)


def _lat_lon_of(x: float, y: float, zoom: int = TILE_ZOOM) -> Point:
    n = 2**zoom
    lon = x / n * 360.0 - 180.0
    lat = math.degrees(math.atan(math.sinh(math.pi * (1 - 2 * y / n))))
    return lat, lon


def sample_points(area: Area) -> list[Point]:
    """Return the centroid, then the four quadrant centres, rounded to about a metre."""
    n = 2**TILE_ZOOM
    x = (area.lon + 180.0) / 360.0 * n
    y = (1.0 - math.asinh(math.tan(math.radians(area.lat))) / math.pi) / 2.0 * n
    points = [(area.lat, area.lon)]
    for dy in (-QUADRANT, QUADRANT):
        for dx in (-QUADRANT, QUADRANT):
            points.append(_lat_lon_of(x + dx, y + dy))
    return [(round(lat, 5), round(lon, 5)) for lat, lon in points][:MAX_POINTS]


def point_key(point: Point) -> str:
    """Return the "lat,lon" key of a point, as the cache and the providers read it."""
    return f"{point[0]:.5f},{point[1]:.5f}"


def parse_point(key: str) -> Point:
    """Read a "lat,lon" key back, refusing anything else."""
    lat_text, lon_text = key.split(",")
    lat, lon = float(lat_text), float(lon_text)
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise ValueError(f"not a point: {key!r}")
    return lat, lon


def mesh250(lat: float, lon: float) -> str:
    """Return the 10-digit quarter grid square (250 m mesh) code of a point (JIS X 0410)."""
    # 1st mesh: 40' of latitude by 1 degree of longitude; 2nd: 1/8 of it; 3rd: 1/10 of
    # that; then halves twice, numbered 1 (SW), 2 (SE), 3 (NW), 4 (NE).
    p, a = divmod(lat * 60, 40)
    q, b = divmod(a, 5)
    r, c = divmod(b * 60, 30)
    u, f = divmod(lon - 100, 1)
    v, g = divmod(f * 60, 7.5)
    w, h = divmod(g * 60, 45)
    code = f"{int(p):02d}{int(u):02d}{int(q)}{int(v)}{int(r)}{int(w)}"
    for _ in range(2):
        half_lat, half_lon = 15.0 if _ == 0 else 7.5, 22.5 if _ == 0 else 11.25
        s, c = divmod(c, half_lat)
        t, h = divmod(h, half_lon)
        code += str(int(s) * 2 + int(t) + 1)
    return code
