"""Designated emergency evacuation sites (指定緊急避難場所): GSI's GeoJSON tiles, and the demo's.

Real: ``GET {EVACUATION_SITES_URL}/skhb0{n}/10/{x}/{y}.geojson`` (default base
https://maps.gsi.go.jp/xyz) through the pooled client, one tile set per hazard type a site
is designated for (n: 1 洪水 ... 8 火山現象), served at zoom 10 only: both as GSI's own map
configures them (gsi-cyberjapan/gsimaps, layers_txt/layers_skhb.txt, maxNativeZoom 10). The
features' properties ``name`` and ``address`` are third parties' record (docs/providers.md:
unconfirmed). A 404 is "no site of that type in that tile", not a failure. Only sites a
municipality registered with GSI and agreed to publish are there.

Demo: sites constructed to that format, deterministic per place (a lattice of ~1.2 km cells
over longitude and latitude, each holding a site of a type or not by a hash), named as
constructed: never a municipality's record.

An answer is JSON-safe, so the shared cache can hold it:
{"sites": [[lon, lat, name, address], ...], "date": "YYYY-MM-DD" (Last-Modified) or "",
"read": "YYYY-MM-DD" (the day it was read; the demo's have none)}.
"""

import hashlib
import json
import threading
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import lru_cache
from typing import Any

import mercantile

from ..errors import ProviderError, UpstreamError
from .http import Client, RetryPolicy

DEFAULT_URL = "https://maps.gsi.go.jp/xyz"  # as GSI's own map reads them (layers_skhb.txt)
ZOOM = 10  # the only zoom the sets are served at (as public projects record it)
# GSI's hazard types, by its numbers (https://www.gsi.go.jp/bousaichiri/hinanbasho.html).
HAZARDS = {
    1: ("洪水", "flood"),
    2: ("崖崩れ、土石流及び地滑り", "slope failure, debris flow and landslide"),
    3: ("高潮", "storm surge"),
    4: ("地震", "earthquake"),
    5: ("津波", "tsunami"),
    6: ("大規模な火事", "large fire"),
    7: ("内水氾濫", "inland flooding"),
    8: ("火山現象", "volcanic phenomena"),
}
PAGE = "https://www.gsi.go.jp/bousaichiri/hinanbasho.html"
# The credit in the form GSI's terms give for its data processed (「○○データ」（国土地理院）
# （当該ページのURL）を加工して作成), shown wherever the sites are, print included.
CREDIT = {
    "ja": f"出典：「指定緊急避難場所データ」（国土地理院）（{PAGE}）を加工して作成",
    "en": f"Source: 「指定緊急避難場所データ」 (GSI) ({PAGE}), processed",
    "url": PAGE,
}
# Tsunami's tiles around Nagoya's port, which a public project read with 1,143 sites in 2026-09
# (docs/providers.md): `providers-check` asks it, and a set with no site there is out.
SAMPLE = (5, "10/901/405")


def dataset(code: int) -> str:
    """Return the cache's dataset name of a hazard type's tiles."""
    return f"evacuation_{code}"


DATASETS = tuple(dataset(code) for code in HAZARDS)


def tile_keys(lat: float, lon: float, reach_m: float) -> list[str]:
    """Return the zoom-10 tiles ("10/x/y") that hold every point within reach_m of a point."""
    import math

    dlat = reach_m / 111_320.0
    dlon = dlat / max(0.01, math.cos(math.radians(lat)))
    found = mercantile.tiles(lon - dlon, lat - dlat, lon + dlon, lat + dlat, zooms=ZOOM)
    return sorted(f"{t.z}/{t.x}/{t.y}" for t in found)


def parse_tile(body: bytes) -> list[list[Any]]:
    """Return a GeoJSON tile's point sites as [lon, lat, name, address]; refuse anything else.

    A feature that is not a point (or not an object at all) is skipped; the names are as
    published (the CSV's 施設・場所名 and 住所 are read too, should the tiles carry those).
    """
    data = json.loads(body)
    if not isinstance(data, dict) or not isinstance(data.get("features"), list):
        raise ValueError("not a GeoJSON FeatureCollection")
    sites = []
    for feature in data["features"]:
        if not isinstance(feature, dict) or not isinstance(feature.get("geometry"), dict):
            continue
        geometry = feature["geometry"]
        coords = geometry.get("coordinates")
        if geometry.get("type") != "Point" or not isinstance(coords, list) or len(coords) < 2:
            continue
        lon, lat = coords[0], coords[1]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lon, lat)):
            continue
        props = feature.get("properties")
        props = props if isinstance(props, dict) else {}
        name = props.get("name") or props.get("施設・場所名") or ""
        address = props.get("address") or props.get("住所") or ""
        sites.append([round(float(lon), 7), round(float(lat), 7), str(name), str(address)])
    return sites


def modified_date(value: str | None) -> str:
    """Return a Last-Modified header's date as YYYY-MM-DD ("" when absent or unreadable)."""
    if not value:
        return ""
    try:
        return parsedate_to_datetime(value).astimezone(UTC).date().isoformat()
    except (TypeError, ValueError):
        return ""


class GsiSites:
    """GSI's evacuation site tiles, read through the pooled client."""

    real = True

    def __init__(self, base_url: str, client: Client, policy: RetryPolicy | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.client = client
        self.policy = policy or RetryPolicy()

    def origin(self) -> str:
        """Name GSI by the base URL: part of every cache key."""
        return f"gsi {self.base_url}"

    def url(self, code: int, key: str) -> str:
        """Return a hazard type's tile URL."""
        return f"{self.base_url}/skhb{code:02d}/{key}.geojson"

    def fetch(self, code: int, key: str, stop: threading.Event | None = None) -> dict[str, Any]:
        """Fetch one tile of one hazard type; a 404 is "no site of that type there"."""
        try:
            response = self.client.get(self.url(code, key), self.policy, ok=(200, 404))
        except UpstreamError as exc:
            reason = f"GSI evacuation sites: {exc.reason}"
            raise ProviderError(dataset(code), key, reason, exc.detail) from exc
        # Read today: kept with the answer, as the cache may hand it to a report days later.
        read = datetime.now(UTC).date().isoformat()
        if response.status_code == 404:
            return {"sites": [], "date": "", "read": read}
        try:
            sites = parse_tile(response.content)
        except (ValueError, TypeError, AttributeError) as exc:  # not JSON, or not a collection:
            # never an error of the job's own: the report stands and says they were unread
            reason = "GSI evacuation sites: the answer is not a GeoJSON tile"
            raise ProviderError(dataset(code), key, reason) from exc
        modified = modified_date(response.headers.get("last-modified"))
        return {"sites": sites, "date": modified, "read": read}

    def source(self, answers: list[dict[str, Any]]) -> dict[str, Any]:
        """Describe the data with its credit and date: the newest tile's as GSI dated it,
        else the day the oldest tile was read (a tile from the cache was read before today).
        """
        known = sorted(a["date"] for a in answers if a.get("date"))
        read = sorted(a["read"] for a in answers if a.get("read"))
        today = datetime.now(UTC).date().isoformat()
        return {
            "real": True,
            **CREDIT,
            "date": known[-1] if known else read[0] if read else today,
            "dated_by": "modified" if known else "read",
        }

    def sample(self) -> dict[str, Any]:
        """Ask for the sample tile and judge it (`providers-check`)."""
        code, key = SAMPLE
        out = {"path": f"skhb{code:02d}/{key}.geojson", "ok": False, "sites": 0}
        try:
            answer = self.fetch(code, key)
        except ProviderError as exc:
            return {**out, "verdict": exc.reason}
        out["sites"] = len(answer["sites"])
        if not answer["sites"]:
            return {**out, "verdict": "not available: the sample tile holds no site"}
        return {**out, "ok": True, "verdict": "available"}


def describe_check(result: dict[str, Any]) -> str:
    """Return one line of `providers-check` for the sample's judgement."""
    return f"GSI {result['path']}: {result['sites']} sites: {result['verdict']}"


# The demo: a lattice of cells this many degrees a side, and the share of cells holding a
# site of each type (earthquake sites are the most common, volcano sites the rarest).
DEMO_CELL_DEGREES = 0.011
DEMO_SHARE = {1: 0.35, 2: 0.2, 3: 0.2, 4: 0.5, 5: 0.2, 6: 0.15, 7: 0.2, 8: 0.0}
DEMO_NAME = "（デモ）{hazard}の避難場所 {n}"


@lru_cache(maxsize=256)
def constructed(code: int, key: str) -> list[list[Any]]:
    """Return the demo's sites of a hazard type in a tile: the same every time, per place.

    Each cell of a lattice over longitude and latitude holds a site or not by a hash of its
    type and cell, placed inside the cell by the same hash, so neighbouring tiles agree;
    only sites on land (inside the municipalities' outlines) are kept. Constructed to the
    documented format; never a municipality's record.
    """
    z, x, y = (int(v) for v in key.split("/"))
    west, south, east, north = mercantile.bounds(x, y, z)
    size = DEMO_CELL_DEGREES
    sites = []
    for i in range(int(south // size), int(north // size) + 1):
        for j in range(int(west // size), int(east // size) + 1):
            digest = hashlib.sha256(f"site/{code}/{i}/{j}".encode()).digest()
            if digest[0] / 256 >= DEMO_SHARE[code]:
                continue
            lat = (i + 0.15 + 0.7 * digest[1] / 255) * size
            lon = (j + 0.15 + 0.7 * digest[2] / 255) * size
            if not (south <= lat < north and west <= lon < east):
                continue
            name = DEMO_NAME.format(hazard=HAZARDS[code][0], n=int.from_bytes(digest[3:5]) % 1000)
            sites.append([round(lon, 7), round(lat, 7), name, ""])
    return [site for site, land in zip(sites, on_land(sites, (west, south, east, north)),
                                       strict=True) if land]  # fmt: skip


def on_land(sites: list[list[Any]], bounds: tuple[float, float, float, float]) -> list[bool]:
    """Tell which sites lie inside a municipality's outline (no outline near: none)."""
    import numpy as np
    import shapely

    from ..registers import outlines

    if not sites:
        return []
    lons = np.array([s[0] for s in sites])
    lats = np.array([s[1] for s in sites])
    land = np.zeros(len(sites), dtype=bool)
    for _, unit in outlines.units_near(bounds):
        land |= shapely.contains_xy(unit, lons, lats)
    return land.tolist()


class DemoSites:
    """The demo's constructed sites, answered without a call."""

    real = False

    def origin(self) -> str:
        """Name the demo: its answers are its own."""
        return "demo"

    def fetch(self, code: int, key: str, stop: threading.Event | None = None) -> dict[str, Any]:
        """Return the constructed sites of a hazard type in a tile."""
        return {"sites": constructed(code, key), "date": ""}

    def source(self, answers: list[dict[str, Any]]) -> dict[str, Any]:
        """Say plainly that these sites are constructed."""
        return {"real": False}
