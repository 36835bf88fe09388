"""Which point a text names, and the unit and 町丁目 it lies in.

Decimal degrees ("35.6812, 139.7671"), a GSI map URL's fragment, or a Google Maps link
(its pin, its searched point, else its view's centre); placed in the unit whose outline
contains it (outlines.py) and named by the 町丁目 nearest it.
"""

import math
import re

from ..errors import N_, PlaceNotFound
from ..registers import addresses, outlines
from .area import Area, spot
from .gazetteer import gazetteer
from .streets import address_record

# A point: decimal latitude and longitude, or a GSI map URL's "#zoom/lat/lon".
LAT_LON = re.compile(r"(-?[0-9]{1,3}\.[0-9]+)\s*[,、\s]\s*(-?[0-9]{1,3}\.[0-9]+)")
GSI_MAP_URL = re.compile(
    r"maps\.gsi\.go\.jp/.*#[0-9]{1,2}/(-?[0-9]+(?:\.[0-9]+)?)/(-?[0-9]+(?:\.[0-9]+)?)"
)
# A Google Maps link: the pin's own place ("!3d35.68!4d139.76" in its data), else the
# searched point ("?q=35.68,139.76", "query=", "ll="), else the view's centre
# ("/@35.68,139.76,15z").
GOOGLE_MAP_URL = re.compile(r"(?:\bgoogle\.[a-z.]+/maps|\bmaps\.google\.[a-z.]+)\S*", re.I)
_DEGREES = r"(-?[0-9]{1,3}(?:\.[0-9]+)?)"
GOOGLE_POINTS = (
    re.compile(rf"!3d{_DEGREES}!4d{_DEGREES}"),
    re.compile(rf"[?&](?:q|query|ll|center)={_DEGREES}(?:,|%2C)(?:\+|%20)*{_DEGREES}", re.I),
    re.compile(rf"/@{_DEGREES},{_DEGREES}"),
)
JAPAN_BOX = (20.0, 122.0, 46.5, 154.0)  # south, west, north, east
NEAR_MISSING_KM = 15.0


def named_point(text: str) -> re.Match[str] | None:
    """Return the latitude and longitude (groups 1, 2) the text names as a point, if any."""
    if point := LAT_LON.fullmatch(text) or GSI_MAP_URL.search(text):
        return point
    if not (link := GOOGLE_MAP_URL.search(text)):
        return None
    return next((m for pattern in GOOGLE_POINTS if (m := pattern.search(link[0]))), None)


def by_point(lat: float, lon: float, typed: str = "") -> Area:
    """Return the spot at a point in Japan: its unit, its circle and the 町丁目 it lies in."""
    south, west, north, east = JAPAN_BOX
    if not (south <= lat <= north and west <= lon <= east):
        raise PlaceNotFound(
            N_(
                "%(lat)s, %(lon)s is not in Japan. Give the latitude first, then the "
                "longitude, in decimal degrees (35.6812, 139.7671)."
            ),
            lat=f"{lat:g}",
            lon=f"{lon:g}",
        )
    lat, lon = round(lat, 5), round(lon, 5)
    gaz = gazetteer()
    current = {area.code5 for area in gaz.areas}
    found = [gaz.by_code5[c] for c in outlines.containing(lat, lon, current)]
    # Where a coarser stand-in outline (長崎市's) overlaps a neighbour's real one, the real one.
    coarse = outlines.coarse_codes()
    found.sort(key=lambda unit: unit.code5 in coarse)
    if not found and (near_coarse := outlines.nearest_coarse(lat, lon, current)):
        found = [gaz.by_code5[near_coarse]]  # in a gap of its coarse outline: its coast
    approximate = False
    if not found:
        # A unit neither outline source has (none shipped now): the nearest such centre, if close.
        missing = set(outlines.meta()["missing"]) & current
        near = sorted(
            (km_between(lat, lon, gaz.by_code5[c].lat, gaz.by_code5[c].lon), c) for c in missing
        )
        if not near or near[0][0] > NEAR_MISSING_KM:
            raise PlaceNotFound(
                N_(
                    "%(lat)s, %(lon)s lies in no municipality's outline: it may be at sea. "
                    "Check the point, or type the municipality's name."
                ),
                lat=f"{lat:.5f}",
                lon=f"{lon:.5f}",
            )
        found, approximate = [gaz.by_code5[near[0][1]]], True
    unit = found[0]
    street = addresses.nearest(unit.code5, lat, lon)
    return spot(
        unit,
        lat,
        lon,
        outlines.POINT_RADIUS_M,
        approximate_location=approximate,
        location_basis=unit.name_ja if approximate else "",
        # The 町丁目 the point lies in, by the nearest representative point: a name a
        # reader knows ("丸の内一丁目"), where the point is within its circle.
        address=address_record(typed, unit, street, "point", ""),
    )


def km_between(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Return the distance between two points in km (flat, fine within a prefecture)."""
    d_lat = (lat2 - lat1) * 111.32
    d_lon = (lon2 - lon1) * 111.32 * math.cos(math.radians(lat1))
    return math.hypot(d_lat, d_lon)
