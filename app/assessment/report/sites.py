"""Where to go: the nearest designated emergency evacuation sites for each hazard present.

For a point report, each hazard present at the spot or in its circle (a zone layer with
zones, a detail of flood shown, a layer uncertain; earthquake always, since every place in
Japan shakes) is matched to the type of site designated for it (LAYER_HAZARD), and the
nearest few sites of that type within the circle plus MARGIN_M are listed with their
distance and compass direction, and placed on the report's map. Pure: sites in, figures
out; the figures are language-free (the template words them).
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..grid.locate import bearing_of, compass, offsets_m
from .spot import rounded
from .states import READ, SHOWN, UNCERTAIN, ZONES, state_of

# A report layer -> the GSI hazard type of the sites designated for it
# (sources/evacuation.HAZARDS): house collapse, flood duration and the planned scale are
# details of flood.
LAYER_HAZARD = {
    "flood": 1,
    "flood_duration": 1,
    "flood_planned": 1,
    "house_collapse": 1,
    "landslide": 2,
    "storm_surge": 3,
    "tsunami": 5,
    "inland_flood": 7,
    "liquefaction": 4,
    "seismic": 4,
}
EVERYWHERE = 4  # earthquake: every place in Japan shakes, so every point report lists them
NEAREST = 3  # sites listed per hazard
MARGIN_M = 2000.0  # searched beyond the circle: a site just outside it is still near
# States of a hazard's sites: listed; the data holds sites, none of this type within
# reach; the tiles read hold no site of any type (the municipality may not have registered
# them with GSI); the data could not be read.
SITES, NONE_NEAR, NO_DATA, UNAVAILABLE = "sites", "none_near", "no_data", "unavailable"


def reach_m(radius_m: float) -> float:
    """Return how far sites are searched from the spot: the circle and MARGIN_M."""
    return float(radius_m) + MARGIN_M


def present(layers: Iterable[Mapping[str, Any]]) -> dict[int, list[str]]:
    """Return the hazard types present, in report order, with the layers that found them.

    A zone layer counts with zones found (or shown, or uncertain: the zone may be there);
    liquefaction and shaking whenever read (every place in Japan shakes).
    """
    found: dict[int, list[str]] = {}
    for row in layers:
        code = LAYER_HAZARD.get(row["key"])
        state = state_of(row)
        if code is None or state not in (ZONES, SHOWN, UNCERTAIN, READ):
            continue
        found.setdefault(code, []).append(row["key"])
    return found


def nearest(
    lat: float, lon: float, sites: Sequence[Sequence[Any]], reach: float, limit: int = NEAREST
) -> list[dict[str, Any]]:
    """Return the nearest sites within reach of a point, nearest first.

    sites are [lon, lat, name, address]; the same site in two answers is counted once.
    Distances are on a local flat earth (under 0.1 % off within a few kilometres).
    """
    unique = list({(s[0], s[1], s[2]): s for s in sites}.values())
    if not unique:
        return []
    lons = np.array([float(s[0]) for s in unique])
    lats = np.array([float(s[1]) for s in unique])
    east, north = offsets_m(lat, lon, lats, lons)
    distance = np.hypot(east, north)
    order = [int(i) for i in np.argsort(distance, kind="stable") if distance[i] <= reach]
    out = []
    for i in order[:limit]:
        bearing = bearing_of(float(east[i]), float(north[i]))
        out.append(
            {
                "name": unique[i][2],
                "address": unique[i][3],
                "lat": float(lats[i]),
                "lon": float(lons[i]),
                "metres": rounded(float(distance[i])),
                "bearing": round(bearing),
                "direction": compass(bearing),
            }
        )
    return out


def on_map(
    pin: Sequence[float], xy: Sequence[float], width: float, height: float, edge: float = 36.0
) -> tuple[list[float], bool]:
    """Return where a site's marker goes on the map, and whether that is the site itself.

    A site off the map is drawn at the map's edge on the line from the pin towards it.
    """
    x, y = xy
    low_x, low_y, high_x, high_y = edge, edge, width - edge, height - edge
    if low_x <= x <= high_x and low_y <= y <= high_y:
        return [round(x, 1), round(y, 1)], True
    px, py = pin
    dx, dy = x - px, y - py
    scale = 1.0
    for d, p, low, high in ((dx, px, low_x, high_x), (dy, py, low_y, high_y)):
        if d > 0:
            scale = min(scale, (high - p) / d)
        elif d < 0:
            scale = min(scale, (low - p) / d)
    return [round(px + dx * scale, 1), round(py + dy * scale, 1)], False


def section(
    found: Mapping[int, list[str]],
    answers: Mapping[int, Sequence[Mapping[str, Any]]] | None,
    here: tuple[float, float],
    reach: float,
    place: Any = None,
) -> dict[str, Any]:
    """Return the report's stored section: per hazard present, its nearest sites or why none.

    answers: per hazard type, its tiles' answers ({"sites": [...]}); None when the data
    could not be read. place(lat, lon) -> ([x, y], on the map) places a site on the map.
    """
    lat, lon = here
    any_site = answers is not None and any(a["sites"] for per in answers.values() for a in per)
    hazards = []
    for code, layers in found.items():
        row: dict[str, Any] = {"code": code, "layers": layers}
        if answers is None:
            row["state"] = UNAVAILABLE
        elif not any_site:
            row["state"] = NO_DATA
        else:
            sites = nearest(lat, lon, [s for a in answers[code] for s in a["sites"]], reach)
            for site in sites:
                if place is not None:
                    site["xy"], site["on_map"] = place(site["lat"], site["lon"])
            row.update({"state": SITES if sites else NONE_NEAR, "sites": sites})
        hazards.append(row)
    return {"reach_m": round(reach), "hazards": hazards}
