"""A place's real extent: municipality outlines (国土数値情報 N03), and a point's circle.

data/outlines.zip is built by scripts/build_outlines.py (its docstring says from what and
how; index.json inside records the source, licence, commit and date). Each outline is its
own zip member, read on first use and kept in a small LRU, so a worker holds only the
outlines of the places it is assessing, not the whole country.
"""

import json
import math
import os
import threading
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import shapely
from shapely.geometry import shape
from shapely.geometry.base import BaseGeometry

POINT_RADIUS_M = 500.0
MISSING_RADIUS_M = 3000.0  # a unit whose outline the source lacks: a circle, said so
# A unit whose outline comes from the coarser fallback source (長崎市): its edge strays up
# to about 170 m from the real one and it leaves out islets, up to about 2 km off in nine
# of ten units measured (docs/providers.md); a point that close to it, and in no outline,
# is taken to lie in it.
NEAR_COARSE_KM = 2.0
METRES_PER_DEGREE_LAT = 111_320.0

_lock = threading.Lock()


@dataclass(frozen=True)
class Outline:
    """The extent an assessment reads, and how far it can be trusted."""

    geometry: BaseGeometry
    kind: str  # "outline", "approximate" (a union of older units, a coarser outline), "circle"
    note: str = ""  # what it is, when it is not the unit's own outline (index.json's words)


_open: dict[int, zipfile.ZipFile] = {}


def _archive() -> zipfile.ZipFile:
    """Return the archive, opened once per process (reading its directory costs 15 ms).

    Per process: a forked process must not share the file's offset. Callers hold _lock.
    """
    archive = _open.get(os.getpid())
    if archive is None:
        path = resources.files(__package__).joinpath("data", "outlines.zip")
        archive = _open[os.getpid()] = zipfile.ZipFile(str(path))
    return archive


@lru_cache(maxsize=1)
def index() -> dict[str, Any]:
    """Return the outline index: provenance ("meta") and every unit's box ("areas")."""
    with _lock:
        return json.loads(_archive().read("index.json"))


def meta() -> dict[str, Any]:
    """Return where the outlines come from (source, licence, commit, build date)."""
    return index()["meta"]


@lru_cache(maxsize=32)
def unit_geometry(code5: str) -> BaseGeometry | None:
    """Return a unit's own outline (None where the source lacks it)."""
    entry = index()["areas"].get(code5)
    if entry is None or entry.get("missing"):
        return None
    if entry.get("union_of"):  # a designated city: its wards
        wards = [unit_geometry(code) for code in entry["union_of"]]
        geometry = shapely.union_all([w for w in wards if w is not None])
        shapely.prepare(geometry)
        return geometry
    with _lock:
        geometry = shape(json.loads(_archive().read(f"{code5}.json")))
    shapely.prepare(geometry)
    return geometry


def circle(lat: float, lon: float, radius_m: float) -> BaseGeometry:
    """Return a circle around a point, in degrees (an ellipse: longitude shrinks north)."""
    d_lat = radius_m / METRES_PER_DEGREE_LAT
    d_lon = d_lat / math.cos(math.radians(lat))
    unit = shapely.Point(0, 0).buffer(1.0, quad_segs=32)
    return shapely.affinity.affine_transform(unit, [d_lon, 0, 0, d_lat, lon, lat])


def units_near(
    bounds: tuple[float, float, float, float], codes: set[str] | None = None
) -> list[tuple[str, BaseGeometry]]:
    """Return (code, outline) of every leaf unit (no city of wards) whose box meets bounds."""
    west, south, east, north = bounds
    found = []
    for code5, entry in index()["areas"].items():
        b = entry.get("bbox")
        if not b or entry.get("union_of") or entry.get("union_of_wards"):
            continue
        if codes is not None and code5 not in codes:
            continue
        if b[0] <= east and b[2] >= west and b[1] <= north and b[3] >= south:
            geometry = unit_geometry(code5)
            if geometry is not None:
                found.append((code5, geometry))
    return found


# Outlines simplified one by one leave slivers between neighbours (about 150 m at most):
# land is their union widened by this much, so a point's circle loses no street to them.
GAP_DEGREES = 0.0015


def on_land(geometry: BaseGeometry) -> BaseGeometry:
    """Return the part of a shape on land: inside the outlines it touches (the sea cut off)."""
    near = [unit for _, unit in units_near(geometry.bounds)]
    if not near:
        return geometry  # no outline near at all: nothing to clip it to
    land = shapely.union_all(near).buffer(GAP_DEGREES).buffer(-GAP_DEGREES)
    clipped = geometry.intersection(land)
    if clipped.is_empty:
        return geometry
    shapely.prepare(clipped)
    return clipped


# A prefecture whose units cover less than this share of a shape is not taken to be in it:
# the edge where simplified outlines overlap is no reason to read a neighbour's tiles.
PREFECTURE_SHARE = 0.001


def prefecture_shares(geometry: BaseGeometry) -> dict[str, float]:
    """Return the share of a shape that lies in each prefecture it touches (two-digit codes)."""
    area = geometry.area or 1e-12
    shares: dict[str, float] = {}
    for code5, unit in units_near(geometry.bounds):
        if unit.intersects(geometry):
            part = unit.intersection(geometry).area / area
            shares[code5[:2]] = shares.get(code5[:2], 0.0) + part
    return shares


def prefectures_touching(geometry: BaseGeometry, own: str = "") -> list[str]:
    """Return the two-digit codes of the prefectures a shape lies in, own first if given."""
    shares = prefecture_shares(geometry)
    found = sorted(pref for pref, share in shares.items() if share >= PREFECTURE_SHARE)
    if own and own not in found:
        found.insert(0, own)
    return sorted(found, key=lambda pref: pref != own)


def outline_of(area: Any) -> Outline:
    """Return the extent to read for an area: its circle on land, its outline, or a stand-in.

    A point's circle is clipped to the outlines it touches, so the sea around a coastal
    point never dilutes a share: shares are of land.
    """
    if getattr(area, "radius_m", 0):
        whole = circle(area.lat, area.lon, area.radius_m)
        land = on_land(whole)
        note = "point" if land.area >= whole.area * 0.999 else "point, land only"
        return Outline(land, "circle", note)
    geometry = unit_geometry(area.code5)
    entry = index()["areas"].get(area.code5, {})
    if geometry is None:
        note = f"no outline in the source: a {MISSING_RADIUS_M / 1000:g} km circle"
        return Outline(circle(area.lat, area.lon, MISSING_RADIUS_M), "circle", note)
    if entry.get("approximate"):
        return Outline(geometry, "approximate", entry["approximate"])
    return Outline(geometry, "outline")


def coarse_codes() -> set[str]:
    """Return the units whose outline is the fallback source's coarser one."""
    return set(meta().get("fallback", {}).get("units", []))


def nearest_coarse(lat: float, lon: float, codes: set[str] | None = None) -> str | None:
    """Return the unit of coarse outline nearest the point, if within NEAR_COARSE_KM."""
    k = math.cos(math.radians(lat))
    d_lat = NEAR_COARSE_KM * 1000 / METRES_PER_DEGREE_LAT
    near = []
    for code5 in sorted(coarse_codes() if codes is None else coarse_codes() & codes):
        box = index()["areas"][code5].get("bbox")
        if not box or not (box[0] - d_lat / k <= lon <= box[2] + d_lat / k):
            continue
        if not box[1] - d_lat <= lat <= box[3] + d_lat:
            continue
        geometry = unit_geometry(code5)
        scaled = shapely.affinity.scale(geometry, k, 1.0, origin=(lon, lat))
        km = scaled.distance(shapely.Point(lon, lat)) * METRES_PER_DEGREE_LAT / 1000
        if km <= NEAR_COARSE_KM:
            near.append((km, code5))
    return min(near)[1] if near else None


def containing(lat: float, lon: float, codes: set[str] | None = None) -> list[str]:
    """Return the codes of the units whose outline contains the point (wards, not cities)."""
    near = units_near((lon, lat, lon, lat), codes)
    return [code5 for code5, geometry in near if shapely.contains_xy(geometry, lon, lat)]
