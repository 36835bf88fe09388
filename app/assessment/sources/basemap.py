"""The base map under the report's zones: GSI's pale map tiles (地理院タイル 淡色地図).

``GET {BASEMAP_URL}/{z}/{x}/{y}.png`` (default https://cyberjapandata.gsi.go.jp/xyz/pale)
through the same pooled client as the portal's tiles, and cached with them (dataset
DATASET, key "z/x/y"). GSI's terms ask for the credit 「地理院タイル」 with a link to the
tile list (https://maps.gsi.go.jp/development/ichiran.html). Only the real providers read
it: a demo report has no base map, and its map says so.

An answer is the portal's JSON-safe shape, {"png": base64 or None} (None: a 404, no tile).
"""

import threading
from typing import Any

import mercantile
import shapely

from ..errors import ProviderError, UpstreamError
from ..grid import tiles
from .http import Client, RetryPolicy
from .portal import encode

DEFAULT_URL = "https://cyberjapandata.gsi.go.jp/xyz/pale"
DATASET = "basemap"
TILE_BUDGET = 36  # base map tiles per report, at most: a point's 1 km reads at zoom 17
CREDIT = {
    "ja": "地理院タイル（淡色地図）",
    "en": "GSI Tiles (地理院タイル, pale map)",
    "url": "https://maps.gsi.go.jp/development/ichiran.html",
}


def plan(box: tuple[float, float, float, float]) -> tuple[int, list[mercantile.Tile]]:
    """Return the deepest zoom whose tiles over the box fit TILE_BUDGET, and those tiles."""
    area = shapely.box(*box)
    zoom = tiles.zoom_for(area, TILE_BUDGET)
    return zoom, tiles.covering(area, zoom)


class BaseMap:
    """GSI's pale map tiles, read through the pooled client."""

    def __init__(self, base_url: str, client: Client, policy: RetryPolicy | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.client = client
        self.policy = policy or RetryPolicy()

    def fetch(self, key: str, stop: threading.Event | None = None) -> dict[str, Any]:
        """Fetch one tile; a 404 is "no tile here" (left white), anything else fails."""
        tiles.parse_tile_key(key)
        try:
            response = self.client.get(f"{self.base_url}/{key}.png", self.policy, ok=(200, 404))
        except UpstreamError as exc:
            raise ProviderError(DATASET, key, f"GSI tiles: {exc.reason}", exc.detail) from exc
        if response.status_code == 404:
            return encode(None)
        if not response.content.startswith(b"\x89PNG"):
            raise ProviderError(DATASET, key, "GSI tiles: the answer is not a PNG tile")
        return encode(response.content)
