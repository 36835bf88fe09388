"""Where in a place the mesh services (J-SHIS) are asked: 250 m meshes inside its outline.

mesh_points lays an even grid of 250 m meshes over the place's outline (or a point's
circle), at most MESH_BUDGET of them, so a report's shares are shares of the place's own
ground, not of a box around it. The meshes are fixed per area, so two jobs for one place
ask the services the same questions and share the cache.
"""

import math

Point = tuple[float, float]  # (lat, lon)


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


MESH_BUDGET = 64  # 250 m meshes asked per dataset per job, at most
MESH_LAT = 1 / 480  # a 250 m mesh is 7.5" of latitude by 11.25" of longitude
MESH_LON = 1 / 320


def mesh_points(outline: object, budget: int = MESH_BUDGET) -> list[Point]:
    """Return the centres of 250 m meshes inside an outline, on an even grid, at most budget.

    Every mesh whose centre is inside when they fit the budget; else every k-th mesh in
    both directions, k as small as fits. At least the outline's representative point.
    """
    import numpy as np
    import shapely

    west, south, east, north = outline.bounds  # type: ignore[attr-defined]
    i0, i1 = math.floor(south / MESH_LAT), math.floor(north / MESH_LAT)
    j0, j1 = math.floor(west / MESH_LON), math.floor(east / MESH_LON)
    stride = 1
    while True:
        # On multiples of the stride across the whole grid, not from the outline's corner:
        # neighbouring places sampled at one stride ask the same meshes along their border.
        rows = np.arange(-(-i0 // stride) * stride, i1 + 1, stride)
        cols = np.arange(-(-j0 // stride) * stride, j1 + 1, stride)
        if len(rows) * len(cols) <= budget * 40 or stride > 4096:
            lat, lon = np.meshgrid((rows + 0.5) * MESH_LAT, (cols + 0.5) * MESH_LON, indexing="ij")
            inside = shapely.contains_xy(outline, lon, lat)
            if inside.sum() <= budget:
                break
        stride += 1
    points = [
        (round(float(a), 5), round(float(b), 5))
        for a, b in zip(lat[inside], lon[inside], strict=True)
    ]
    if not points:
        here = outline.representative_point()  # type: ignore[attr-defined]
        points = [(round(here.y, 5), round(here.x, 5))]
    return points


def mesh_centre(code: str) -> Point:
    """Return the centre (lat, lon) of a 10-digit 250 m mesh (the inverse of mesh250)."""
    p, u, q, v, r, w = int(code[0:2]), int(code[2:4]), *(int(c) for c in code[4:8])
    lat = p * 40 / 60 + q * 5 / 60 + r * 30 / 3600
    lon = 100 + u + v * 7.5 / 60 + w * 45 / 3600
    for digit, half_lat, half_lon in ((code[8], 15, 22.5), (code[9], 7.5, 11.25)):
        s, t = divmod(int(digit) - 1, 2)
        lat += s * half_lat / 3600
        lon += t * half_lon / 3600
    return lat + 3.75 / 3600, lon + 5.625 / 3600
