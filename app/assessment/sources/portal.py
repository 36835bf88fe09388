"""The hazard map portal's designated zones, as raster tiles: the real one and a painted demo.

Real: ``GET {HAZARD_PORTAL_URL}/{id}/{z}/{x}/{y}.png`` (default base
https://disaportaldata.gsi.go.jp/raster) through the pooled client (http.py). A 200 is
the tile; a 404 is "the portal has no tile here", which for a zone dataset means no zone
mapped there. Any other failure raises ProviderError, which fails the job and refunds.

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
from typing import Any

import mercantile
import numpy as np
from PIL import Image

from ..errors import ProviderError, UpstreamError
from .http import Client, RetryPolicy
from .tiles import LEGENDS, TILE_SIZE, parse_tile_key, pixel_centres

DEFAULT_URL = "https://disaportaldata.gsi.go.jp/raster"

# The datasets (as the analysis names them) and the portal's ids.
ZONE_DATASETS = {
    "flood_zones": "01_flood_l2_shinsuishin_data",
    "tsunami_zones": "04_tsunami_newlegend_data",
    "debris_flow_zones": "05_dosekiryukeikaikuiki",
    "steep_slope_zones": "05_kyukeishakeikaikuiki",
    "landslide_zones": "05_jisuberikeikaikuiki",
}
CREDIT_JA = "出典：ハザードマップポータルサイト（国土交通省）の{name}を加工して作成"
NAMES_JA = {
    "flood_zones": "洪水浸水想定区域（想定最大規模）",
    "tsunami_zones": "津波浸水想定",
    "debris_flow_zones": "土砂災害警戒区域（土石流）",
    "steep_slope_zones": "土砂災害警戒区域（急傾斜地の崩壊）",
    "landslide_zones": "土砂災害警戒区域（地すべり）",
}
NAMES_EN = {
    "flood_zones": "flood inundation zones (planned maximum)",
    "tsunami_zones": "tsunami inundation zones",
    "debris_flow_zones": "sediment disaster warning zones (debris flow)",
    "steep_slope_zones": "sediment disaster warning zones (steep slope failure)",
    "landslide_zones": "sediment disaster warning zones (landslide)",
}


def encode(png: bytes | None) -> dict[str, Any]:
    """Return the cacheable answer for a tile's bytes (None: no such tile)."""
    return {"png": None if png is None else base64.b64encode(png).decode("ascii")}


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
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.client = client
        self.policy = policy or RetryPolicy()
        self.basemap = basemap  # basemap.BaseMap: the map under the zones (real reports only)

    def keys(self, area: Any, dataset: str) -> list[str]:
        """Return the tiles covering the area's outline at the deepest zoom in budget."""
        from .zones import plan

        return plan(area).keys

    def url(self, dataset: str, key: str) -> str:
        """Return the tile's URL."""
        return f"{self.base_url}/{ZONE_DATASETS[dataset]}/{key}.png"

    def fetch(self, dataset: str, key: str, stop: threading.Event | None = None) -> dict:
        """Fetch one tile; a 404 is an answer (no zone mapped there), not a failure."""
        if dataset not in ZONE_DATASETS:
            raise ProviderError(dataset, key, "no such dataset here")
        try:
            parse_tile_key(key)
        except ValueError:
            raise ProviderError(dataset, key, "not a tile") from None
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
            "attribution_ja": CREDIT_JA.format(name=NAMES_JA[dataset]),
            "attribution_en": (
                f"Source: Hazard Map Portal Site (MLIT), {NAMES_EN[dataset]}; processed"
            ),
            "url": "https://disaportal.gsi.go.jp/",
            "date": datetime.now(UTC).date().isoformat(),
        }

    def check_each(self, lat: float, lon: float, zoom: int = 15) -> list[tuple[str, Any]]:
        """Ask for the tile of one point per dataset (for `flask providers-check`).

        Returns (label, what came back, or the ProviderError) per dataset.
        """
        key = f"{zoom}/{mercantile.tile(lon, lat, zoom).x}/{mercantile.tile(lon, lat, zoom).y}"
        results: list[tuple[str, Any]] = []
        for dataset, dataset_id in ZONE_DATASETS.items():
            try:
                png = decode_answer(self.fetch(dataset, key))
            except ProviderError as exc:
                results.append((f"portal {dataset_id}", exc))
                continue
            said = (
                "no tile (404: no zone mapped there)" if png is None else f"PNG, {len(png)} bytes"
            )
            results.append((f"portal {dataset_id}", f"{key}: {said}"))
        return results


# The demo: how much of a place each dataset's field paints, and how deep.
DEMO_COVER = {
    "flood_zones": 0.35,
    "tsunami_zones": 0.5,  # of the land near the sea
    "debris_flow_zones": 0.06,
    "steep_slope_zones": 0.08,
    "landslide_zones": 0.03,
}
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


DEMO_COAST_M = 2000.0  # the demo's tsunami zones: land this close to the sea, no further
GAP_DEGREES = 0.0015  # about 150 m: wider than the slivers simplification leaves


def near_the_sea(tile: Any, distance_m: float = DEMO_COAST_M) -> Any:
    """Return the land within distance_m of the sea around a tile, from the N03 outlines.

    Land is the union of the outlines near the tile; what no outline covers is taken for
    sea (so a unit whose outline the source lacks looks like sea to the demo: it is a demo).
    """
    import shapely

    from ..place.outlines import index, unit_geometry

    box = shapely.box(*mercantile.bounds(tile))
    reach = distance_m / 111_320.0 * 1.5  # degrees, generous for longitude
    around = box.buffer(reach)
    west, south, east, north = around.bounds
    parts = []
    for code5, entry in index()["areas"].items():
        b = entry.get("bbox")
        if not b or entry.get("union_of") or entry.get("union_of_wards"):
            continue
        if b[0] <= east and b[2] >= west and b[1] <= north and b[3] >= south:
            geometry = unit_geometry(code5)
            if geometry is not None:
                parts.append(geometry.intersection(around))
    land = shapely.union_all(parts) if parts else shapely.Polygon()
    # Outlines simplified one by one leave slivers between neighbours: close them first.
    sea = around.difference(land.buffer(GAP_DEGREES))
    if sea.is_empty:
        return sea
    return land.intersection(sea.buffer(distance_m / 111_320.0)).intersection(box)


def paint(dataset: str, key: str) -> bytes | None:
    """Return a demo tile for a dataset: its legend's colours where the field is high.

    Tsunami zones are painted only on land near the sea (near_the_sea), so a demo report
    never puts a tsunami zone far inland.
    """
    import shapely

    tile = parse_tile_key(key)
    legend = LEGENDS[ZONE_DATASETS[dataset]]
    lon, lat = pixel_centres(tile)
    # The field at every 4th pixel, spread over 4 x 4 blocks: a demo needs no finer.
    coarse = demo_field(dataset, lon[::4, ::4], lat[::4, ::4])
    if dataset == "tsunami_zones":
        coast = near_the_sea(tile)
        if coast.is_empty:
            return None
        coarse = np.where(shapely.contains_xy(coast, lon[::4, ::4], lat[::4, ::4]), coarse, 0.0)
    field = np.repeat(np.repeat(coarse, 4, axis=0), 4, axis=1)
    threshold = 1.0 - DEMO_COVER[dataset]
    painted = field >= threshold
    if not painted.any():
        return None  # as the portal does: no tile where nothing is mapped
    depth = np.clip((field - threshold) / (1.0 - threshold), 0, 0.999)
    index = (depth * len(legend)).astype(int)
    rgba = np.zeros((TILE_SIZE, TILE_SIZE, 4), dtype=np.uint8)
    colours = np.array([zone.rgb for zone in legend], dtype=np.uint8)
    rgba[painted, :3] = colours[index[painted]]
    rgba[painted, 3] = 255
    out = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(out, "PNG", compress_level=1)
    return out.getvalue()
