"""The hazard map portal's designated zones, as raster tiles: the real one and a painted demo.

Real: ``GET {HAZARD_PORTAL_URL}/{id}/{z}/{x}/{y}.png`` (default base
https://disaportaldata.gsi.go.jp/raster) through the pooled client (http.py); the three
landslide datasets and inland flooding are read per prefecture, ``{id}/{pref}/{z}/{x}/{y}.png``
(the catalogue lists no national landslide path), so their keys carry the two-digit
prefecture code: "13/15/29102/12903". A 200 is the tile; a 404 is "the portal has no tile
here", which for a zone dataset means no zone mapped there (in that prefecture). Any other
failure raises ProviderError, which fails the job and refunds.

Demo: the same tile keys answered with PNGs painted in the legend's colours by a smooth
deterministic field over longitude and latitude, so the same pipeline (outline clipping,
pixel counts, the map) runs on them, and the figures depend on where the place is.

An answer is JSON-safe, so the shared cache can hold it: {"png": base64 or None}.
"""

import base64
import hashlib
import io
import threading
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import mercantile
import numpy as np
from PIL import Image

from ..errors import ProviderError, UpstreamError
from ..grid.legends import LEGENDS, zones_of
from ..grid.tiles import UNKNOWN_LIMIT, classify, parse_tile_key, pixel_axes, read_rgba
from ..grid.zones import PER_PREFECTURE, dataset_keys
from .http import Client, RetryPolicy

DEFAULT_URL = "https://disaportaldata.gsi.go.jp/raster"

# The datasets (as the analysis names them) and the portal's ids.
ZONE_DATASETS = {
    "flood_zones": "01_flood_l2_shinsuishin_data",
    # The planned scale (計画規模, "現在の凡例"), as GSI's own layer configuration names it.
    "flood_planned_zones": "01_flood_l1_shinsuishin_newlegend_data",
    "tsunami_zones": "04_tsunami_newlegend_data",
    # Recorded by public projects, not yet confirmed against GSI's catalogue
    # (docs/providers.md): `providers-check` asks each for a sample tile.
    "storm_surge_zones": "03_hightide_l2_shinsuishin_data",
    "inland_flood_zones": "02_naisui_pref_data",
    "house_collapse_flow_zones": "01_flood_l2_kaokutoukai_hanran_data",
    "house_collapse_bank_zones": "01_flood_l2_kaokutoukai_kagan_data",
    "flood_duration_zones": "01_flood_l2_keizoku_data",
    "debris_flow_zones": "05_dosekiryukeikaikuiki_data",
    "steep_slope_zones": "05_kyukeishakeikaikuiki_data",
    "landslide_zones": "05_jisuberikeikaikuiki_data",
}


def split_key(key: str) -> tuple[str, str]:
    """Return (prefecture code or "", "z/x/y") of a tile key, refusing anything else."""
    parts = key.split("/")
    pref = parts.pop(0) if len(parts) == 4 else ""
    if pref and not (len(pref) == 2 and pref.isdigit() and 1 <= int(pref) <= 47):
        raise ValueError(f"not a prefecture: {pref!r}")
    tile = "/".join(parts)
    parse_tile_key(tile)
    return pref, tile


CREDIT_JA = "出典：ハザードマップポータルサイト（国土交通省）の{name}を加工して作成"
# Each zone dataset's name as the portal names it, (Japanese, English): in its credit, the
# report's sources and a failure's reason alike (report/provenance.py, web/reasons.py).
NAMES = {
    "flood_zones": ("洪水浸水想定区域（想定最大規模）", "flood inundation zones (planned maximum)"),
    "flood_planned_zones": (
        "洪水浸水想定区域（計画規模）",
        "flood inundation zones (planned scale)",
    ),
    "tsunami_zones": ("津波浸水想定", "tsunami inundation zones"),
    "storm_surge_zones": ("高潮浸水想定区域", "storm surge inundation zones"),
    "inland_flood_zones": ("内水（雨水出水）浸水想定区域", "inland (stormwater) flooding zones"),
    "house_collapse_flow_zones": (
        "家屋倒壊等氾濫想定区域（氾濫流）",
        "house-collapse zones (flood flow)",
    ),
    "house_collapse_bank_zones": (
        "家屋倒壊等氾濫想定区域（河岸侵食）",
        "house-collapse zones (bank erosion)",
    ),
    "flood_duration_zones": ("浸水継続時間（想定最大規模）", "flood duration (planned maximum)"),
    "debris_flow_zones": (
        "土砂災害警戒区域（土石流）",
        "sediment disaster warning zones (debris flow)",
    ),
    "steep_slope_zones": (
        "土砂災害警戒区域（急傾斜地の崩壊）",
        "sediment disaster warning zones (steep slope failure)",
    ),
    "landslide_zones": (
        "土砂災害警戒区域（地すべり）",
        "sediment disaster warning zones (landslide)",
    ),
}


def encode(png: bytes | None) -> dict[str, Any]:
    """Return the cacheable answer for a tile's bytes (None: no such tile)."""
    return {"png": None if png is None else base64.b64encode(png).decode("ascii")}


NEGATIVE_TTL_SECONDS = 24 * 3600  # "no such tile" is kept a day at most: zones get published


def tile_ttl(answer: Any) -> float:
    """Return how long a tile answer may be cached: a day at most for "no such tile"."""
    if isinstance(answer, dict) and answer.get("png", "") is None:
        return NEGATIVE_TTL_SECONDS
    if isinstance(answer, dict) and answer.get("sites", None) == []:  # no evacuation site
        return NEGATIVE_TTL_SECONDS
    return float("inf")


def decode_answer(answer: dict[str, Any]) -> bytes | None:
    """Return a tile's bytes from its cached answer."""
    png = answer.get("png")
    return None if png is None else base64.b64decode(png)


class PortalProvider:
    """Designated-zone tiles from the hazard map portal."""

    name = "portal"
    is_demo = False
    datasets = tuple(ZONE_DATASETS)

    def __init__(
        self,
        base_url: str,
        client: Client,
        policy: RetryPolicy | None = None,
        basemap: Any = None,
        evacuation: Any = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.client = client
        self.policy = policy or RetryPolicy()
        self.basemap = basemap  # basemap.BaseMap: the map under the zones (real reports only)
        self.evacuation = evacuation  # evacuation.GsiSites: where to go (point reports)

    def keys(self, area: Any, dataset: str) -> list[str]:
        """Return the tiles covering the area's outline at the deepest zoom in budget."""
        return dataset_keys(area, dataset)

    def origin(self, dataset: str) -> str:
        """Name the portal by its base URL."""
        return f"portal {self.base_url}"

    def url(self, dataset: str, key: str) -> str:
        """Return the tile's URL."""
        return f"{self.base_url}/{ZONE_DATASETS[dataset]}/{key}.png"

    def fetch(self, dataset: str, key: str, stop: threading.Event | None = None) -> dict:
        """Fetch one tile; a 404 is an answer (no zone mapped there), not a failure."""
        if dataset not in ZONE_DATASETS:
            raise ProviderError(dataset, key, "no such dataset here")
        try:
            pref, _ = split_key(key)
        except ValueError:
            raise ProviderError(dataset, key, "not a tile") from None
        if bool(pref) != (dataset in PER_PREFECTURE):
            raise ProviderError(dataset, key, "not a tile of this dataset's paths") from None
        try:
            response = self.client.get(self.url(dataset, key), self.policy, ok=(200, 404))
        except UpstreamError as exc:
            reason = f"hazard map portal: {exc.reason}"
            raise ProviderError(dataset, key, reason, exc.detail) from exc
        if response.status_code == 404:
            return encode(None)
        body = response.content
        if not body.startswith(b"\x89PNG"):
            raise ProviderError(dataset, key, "hazard map portal: the answer is not a PNG tile")
        return encode(body)

    def source(self, dataset: str) -> dict[str, Any]:
        """Describe the dataset, with the credit the portal's terms ask for."""
        return {
            "provider": self.name,
            "real": True,
            "service": "ハザードマップポータルサイト (disaportal.gsi.go.jp)",
            "dataset_id": ZONE_DATASETS[dataset],
            "version": "tiles as served on the date below",
            "version_en": "tiles as served on the date below",
            "version_ja": "下記の日に配信されたタイル",
            "attribution_ja": CREDIT_JA.format(name=NAMES[dataset][0]),
            "attribution_en": (
                f"Source: Hazard Map Portal Site (MLIT), {NAMES[dataset][1]}; processed"
            ),
            "url": "https://disaportal.gsi.go.jp/",
            "date": datetime.now(UTC).date().isoformat(),
        }

    def sample(self, dataset: str, stop: threading.Event | None = None) -> dict[str, Any]:
        """Ask for the dataset's sample tile and judge it (the probe, `providers-check`)."""
        key = SAMPLE_TILES[dataset]
        try:
            response = self.client.get(self.url(dataset, key), self.policy, ok=(200, 404))
        except UpstreamError as exc:
            return judge(dataset, key, exc.status, None, f"hazard map portal: {exc.reason}")
        if response.status_code == 404:
            return judge(dataset, key, 404, None)
        return judge(dataset, key, 200, response.content)


# Read from paths public projects recorded, not yet confirmed against GSI's catalogue:
# providers-check asks them, but their sample alone does not make the start probe serve
# the demo for every layer (the operator's check confirms or corrects them).
UNCONFIRMED = frozenset(
    {
        "storm_surge_zones",
        "inland_flood_zones",
        "house_collapse_flow_zones",
        "house_collapse_bank_zones",
        "flood_duration_zones",
    }
)
# Datasets whose sample failing the start probe says, never a reason to serve the demo
# for every layer: the unconfirmed ones, and the planned scale, whose path and legend GSI's
# own layer configuration gives but whose sample tile was chosen, not fetched.
SAMPLE_UNSURE = UNCONFIRMED | {"flood_planned_zones"}
# Per dataset, a tile known to be painted (fetched in 2026-10, docs/providers.md): Tokyo's
# flood depths, Sendai's tsunami depths, and Tokyo's three landslide layers (13, z8).
# Storm surge and inland flooding: tiles chosen, not fetched (no live access when they were
# added): Tokyo's eastern lowlands behind the bay, and Osaka's centre (27), whose inland
# maps public projects read; the first `providers-check` on a connected machine confirms or
# replaces them. House collapse and flood duration: a z17 tile by the Ōta river in Hiroshima
# whose flood-flow and duration tiles a public project keeps as test fixtures (their digests
# recorded, not fetched here); bank erosion asked at the same tile, chosen, not known painted.
# The planned scale: flood's own sample tile (Tokyo's eastern lowlands, painted at the
# planned maximum), chosen, not fetched: the planned scale floods less of it.
SAMPLE_TILES = {
    "flood_zones": "12/3638/1612",
    "flood_planned_zones": "12/3638/1612",
    "tsunami_zones": "12/3651/1577",
    "storm_surge_zones": "12/3639/1613",
    "inland_flood_zones": "27/12/3589/1626",
    "house_collapse_flow_zones": "17/113769/52153",
    "house_collapse_bank_zones": "17/113769/52153",
    "flood_duration_zones": "17/113769/52153",
    "debris_flow_zones": "13/8/226/102",
    "steep_slope_zones": "13/8/226/102",
    "landslide_zones": "13/8/226/102",
}


def judge(
    dataset: str, key: str, status: int | None, png: bytes | None, failure: str = ""
) -> dict[str, Any]:
    """Return what a sample tile says of a dataset: status, painted and unknown shares, verdict.

    The layer is available only when the sample is a PNG with painted pixels in its
    legend's colours: a 404, a transparent sample or colours of no class mean it is not
    (a moved path or a changed legend would otherwise read as "no zone" everywhere).
    """
    out: dict[str, Any] = {
        "dataset": dataset,
        "path": ZONE_DATASETS[dataset],
        "key": key,
        "status": status,
        "painted": 0.0,
        "unknown": 0.0,
        "ok": False,
    }
    if failure:
        return {**out, "verdict": failure}
    if png is None:
        return {**out, "verdict": "not available: the sample tile is missing (HTTP 404)"}
    try:
        classes = classify(read_rgba(png), LEGENDS[ZONE_DATASETS[dataset]])
    except (OSError, ValueError):
        return {**out, "verdict": "not available: the sample is not a readable PNG tile"}
    painted = int((classes != 0).sum())
    unknown = int((classes == -1).sum())
    out["painted"] = round(painted / classes.size, 4)
    out["unknown"] = round(unknown / painted, 4) if painted else 0.0
    if not painted:
        return {**out, "verdict": "not available: the sample tile is all transparent"}
    if unknown / painted > UNKNOWN_LIMIT:
        return {**out, "verdict": "not available: colours not in the published legend"}
    return {**out, "ok": True, "verdict": "available"}


def describe_check(result: dict[str, Any]) -> str:
    """Return one line of `providers-check` for a sample's judgement."""
    return (
        f"portal {result['path']} {result['key']}: HTTP {result['status'] or '-'}, "
        f"painted {result['painted']:.1%}, unknown colours {result['unknown']:.1%}: "
        f"{result['verdict']}"
    )


# The demo: how much of a place each dataset's field paints, and how deep.
DEMO_COVER = {
    "flood_zones": 0.35,
    "flood_planned_zones": 0.2,  # of flood's own field: inside the demo's flood zones
    "tsunami_zones": 0.5,  # of the land near the sea
    "storm_surge_zones": 0.4,  # of the land near the sea
    "inland_flood_zones": 0.25,
    "house_collapse_flow_zones": 0.08,  # of its field, inside the demo's flood zones
    "house_collapse_bank_zones": 0.04,
    "flood_duration_zones": 0.6,  # of its field, inside the demo's flood zones
    "debris_flow_zones": 0.06,
    "steep_slope_zones": 0.08,
    "landslide_zones": 0.03,
}
# Painted tiles kept per process (a kilobyte or two each): a few large places' worth, so a
# place assessed again is not painted again, as the tile cache keeps the portal's tiles.
PAINTED_TILES = 2048
DEMO_WAVE_DEGREES = 0.03  # about 3 km: the size of the demo's painted patches


def demo_field(dataset: str, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """Return a smooth deterministic field in [0, 1] over longitude and latitude."""
    seed = hashlib.sha256(dataset.encode()).digest()
    total = np.zeros_like(lon)
    for i in range(3):
        a, b, c = (seed[3 * i + j] / 255.0 for j in range(3))
        k = (1.0 + i) / DEMO_WAVE_DEGREES
        total += np.sin(k * (lon * (0.6 + a) + lat * (1.4 - b)) + 6.28 * c)
    return (total / 3.0 + 1.0) / 2.0


DEMO_COAST_M = 2000.0  # the demo's tsunami and storm surge zones: land this close to the sea
# The demo's deepest class per dataset where it is not the legend's last: inland flooding
# (rain the drains cannot take) is painted no deeper than 0.5-3 m, as such maps mostly are.
DEMO_DEEPEST = {"inland_flood_zones": "0.5-3"}
SEA_DATASETS = frozenset({"tsunami_zones", "storm_surge_zones"})
# Constructed, as every demo zone is: house-collapse zones and flood durations are painted
# only where the demo paints a flood zone, since both are details of a river's flooding.
WITHIN_FLOOD = frozenset(
    {"house_collapse_flow_zones", "house_collapse_bank_zones", "flood_duration_zones"}
)
# Constructed too: the planned scale is a smaller flood than the planned maximum, so the
# demo paints it on flood's own field (DEMO_COVER of it, inside flood's zones) this many
# depth classes shallower than flood's class at the same pixel (never under the first).
SHALLOWER_THAN_FLOOD = {"flood_planned_zones": 2}


@lru_cache(maxsize=PAINTED_TILES // 2)
def near_the_sea(tile: Any, distance_m: float = DEMO_COAST_M) -> Any:
    """Return the land within distance_m of the sea around a tile, from the N03 outlines.

    Land is the union of the outlines near the tile; what no outline covers is taken for
    sea (so a unit whose outline the source lacks looks like sea to the demo: it is a demo).
    """
    import shapely

    from ..registers import outlines

    box = shapely.box(*mercantile.bounds(tile))
    reach = distance_m / 111_320.0 * 1.5  # degrees, generous for longitude
    around = box.buffer(reach)
    parts = [unit.intersection(around) for _, unit in outlines.units_near(around.bounds)]
    land = shapely.union_all(parts) if parts else shapely.Polygon()
    # Outlines simplified one by one leave slivers between neighbours: close them first.
    sea = around.difference(land.buffer(outlines.GAP_DEGREES))
    if sea.is_empty:
        return sea
    return land.intersection(sea.buffer(distance_m / 111_320.0)).intersection(box)


@lru_cache(maxsize=PAINTED_TILES)
def paint(dataset: str, key: str) -> bytes | None:
    """Return a demo tile for a dataset: its legend's colours where the field is high.

    Tsunami and storm surge zones are painted only on land near the sea (near_the_sea,
    kept per tile: both ask it), so a demo report never puts them far inland; inland
    flooding stops at its DEMO_DEEPEST class; house-collapse zones and flood durations lie
    inside the demo's flood zones (WITHIN_FLOOD), and the planned scale inside them and
    shallower (SHALLOWER_THAN_FLOOD). The tile is a palette PNG, as the portal's are:
    index 0 transparent, then the legend's colours.
    """
    import shapely

    tile = parse_tile_key(split_key(key)[1])
    legend = zones_of(LEGENDS[ZONE_DATASETS[dataset]])
    if dataset in DEMO_DEEPEST:
        keys = [zone.key for zone in legend]
        legend = legend[: keys.index(DEMO_DEEPEST[dataset]) + 1]
    # The field at every 4th pixel, spread over 4 x 4 blocks: a demo needs no finer.
    lon, lat = np.meshgrid(*(axis[::4] for axis in pixel_axes(tile)))
    coarse = demo_field("flood_zones" if dataset in SHALLOWER_THAN_FLOOD else dataset, lon, lat)
    if dataset in SEA_DATASETS:
        coast = near_the_sea(tile)
        if coast.is_empty:
            return None
        coarse = np.where(shapely.contains_xy(coast, lon, lat), coarse, 0.0)
    if dataset in WITHIN_FLOOD:
        flooded = demo_field("flood_zones", lon, lat) >= 1.0 - DEMO_COVER["flood_zones"]
        coarse = np.where(flooded, coarse, 0.0)
    field = np.repeat(np.repeat(coarse, 4, axis=0), 4, axis=1)
    threshold = 1.0 - DEMO_COVER[dataset]
    painted = field >= threshold
    if not painted.any():
        return None  # as the portal does: no tile where nothing is mapped
    depth = np.clip((field - threshold) / (1.0 - threshold), 0, 0.999)
    classes = (depth * len(legend)).astype(np.uint8) + 1
    if dataset in SHALLOWER_THAN_FLOOD:  # flood's class at each pixel, made shallower
        above = 1.0 - DEMO_COVER["flood_zones"]
        flood = np.clip((field - above) / (1.0 - above), 0, 0.999)
        classes = (flood * len(legend)).astype(np.int16) + 1 - SHALLOWER_THAN_FLOOD[dataset]
        classes = np.maximum(classes, 1).astype(np.uint8)
    index = np.where(painted, classes, 0).astype(np.uint8)
    image = Image.fromarray(index, "P")
    image.putpalette([0, 0, 0, *(channel for zone in legend for channel in zone.rgb)])
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=1, transparency=0)
    return out.getvalue()
