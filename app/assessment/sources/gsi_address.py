"""GSI's address search: an address placed to its 番地, when the service answers.

国土地理院's 地名・住所検索 (``{GSI_ADDRESS_SEARCH_URL}?q=...``) answers a JSON array of
GeoJSON Point features, ``geometry.coordinates`` [lon, lat] and ``properties.title`` (the
address it found). With the real providers on, an address the resolver placed at its
町丁目 (app/assessment/registers/addresses.py) is asked here, through the pooled client and the
layer cache; its answer is taken only when its title is the 町丁目 itself with the 番地
typed after it, and its point lies in the 町丁目's circle. Otherwise, or when the service
cannot be asked, the 町丁目's point stays, and the area says why (address["gsi"]).
"""

import dataclasses
import logging
import math
import re
from typing import Any
from urllib.parse import quote

from ..errors import UpstreamError
from ..place.area import Area, spot
from ..registers import outlines
from ..registers.addresses import town_key
from . import http

log = logging.getLogger(__name__)

DATASET = "gsi_address"
# Asked while the user waits for the submit: one quick try, no retries.
POLICY = http.RetryPolicy(timeout=3.0, retries=0)
CREDIT_JA = "住所の位置：国土地理院 地名・住所検索（番地まで配置したとき）"
CREDIT_EN = "Address position: GSI address search (when placed to the block number)"


def place_address(area: Area, url: str, cache: Any = None) -> Area:
    """Return area placed at its 番地 by GSI's address search, or as it was, saying why."""
    address = area.address or {}
    if address.get("precision") != "chome" or not address.get("banchi"):
        return area
    query = address["matched"] + address["banchi"]
    try:
        features = _ask(url, query, cache)
    except UpstreamError as exc:
        log.info("GSI address search for %s: %s", query, exc)
        return _note(area, "unreachable")
    for feature in features:
        point = _point(feature)
        title = str((feature.get("properties") or {}).get("title", ""))
        if point is None or not _names_banchi(title, address):
            continue
        lat, lon = round(point[0], 5), round(point[1], 5)
        if _metres(lat, lon, area.lat, area.lon) > area.radius_m:
            continue  # an answer outside the 町丁目 is another place of the same name
        return spot(
            area,
            lat,
            lon,
            outlines.POINT_RADIUS_M,
            address={**address, "precision": "banchi", "source": "gsi", "gsi": title},
        )
    return _note(area, "no match")


def _ask(url: str, query: str, cache: Any) -> list[dict[str, Any]]:
    def fetch() -> list[dict[str, Any]]:
        answer = http.get_json(f"{url}?q={quote(query)}", POLICY)
        if not isinstance(answer, list):
            raise UpstreamError("the answer is not a list of places")
        return answer

    return cache.get((DATASET, query), fetch) if cache is not None else fetch()


def _point(feature: Any) -> tuple[float, float] | None:
    try:
        lon, lat = feature["geometry"]["coordinates"][:2]
        return float(lat), float(lon)
    except (KeyError, TypeError, ValueError):
        return None


def _names_banchi(title: str, address: dict[str, str]) -> bool:
    """Tell whether title is the 町丁目 with a 番地 after it (not the 町丁目 alone)."""
    street, typed = town_key(address["matched"]), town_key(title)
    banchi = re.match(r"[0-9]+", town_key(address["banchi"]))
    if not typed.startswith(street) or not banchi:
        return False
    # The whole number, not its start: typed 1 must not accept 12.
    found = re.match(r"[0-9]+", typed[len(street) :])
    return bool(found) and found[0] == banchi[0]


def _metres(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    k = math.cos(math.radians(lat1))
    return math.hypot(lat2 - lat1, (lon2 - lon1) * k) * outlines.METRES_PER_DEGREE_LAT


def _note(area: Area, why: str) -> Area:
    return dataclasses.replace(area, address={**(area.address or {}), "gsi": why})
