"""The GSI elevation API: ground height in metres at a point, with the source of the value.

Documented at https://maps.gsi.go.jp/development/elevation_s.html:
``getelevation.php?lon=..&lat=..&outtype=JSON`` answers ``{"elevation": 39.8, "hsrc":
"5m（レーザ）"}``; where it has no value (the sea, outside Japan) both are the string
"-----". Its terms ask that the source be shown: 国土地理院 (GSI).

Per sample point the provider makes three calls: the point, a point SLOPE_STEP_M east and
one SLOPE_STEP_M north. ``min_m`` is the lowest of the three; ``max_slope_deg`` is the
slope of the plane through them (a slope over 100 m, so a steep bank narrower than that
reads gentler than it is). The layer reports the worst of its points.
"""

import math
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from .jshis import point_of
from .sampling import point_key, sample_points
from .upstream import ProviderError, ProviderFailure, RetryPolicy, UpstreamError, get_json

DEFAULT_URL = "https://cyberjapandata2.gsi.go.jp/general/dem/scripts/getelevation.php"
SLOPE_STEP_M = 100.0
CALLS_PER_POINT = 3
METRES_PER_DEGREE_LAT = 111_320.0


class GsiElevationProvider:
    """Elevation figures (lowest ground, steepest slope) from the GSI elevation API."""

    name = "gsi"
    is_demo = False
    datasets = ("elevation",)

    def __init__(self, url: str = DEFAULT_URL, *, policy: RetryPolicy | None = None) -> None:
        self.base_url = url
        self.policy = policy or RetryPolicy()

    def keys(self, area: Any, dataset: str) -> list[str]:
        """Return the area's sample points."""
        return list(dict.fromkeys(point_key(p) for p in sample_points(area)))

    def height(self, lat: float, lon: float) -> tuple[float, str] | None:
        """Return (metres, source) at one point, or None where GSI has no value."""
        query = urlencode({"lon": f"{lon:.6f}", "lat": f"{lat:.6f}", "outtype": "JSON"})
        url = f"{self.base_url}?{query}"
        try:
            payload = get_json(url, self.policy)
        except UpstreamError as exc:
            raise ProviderFailure(exc.reason, exc.detail) from exc
        if not isinstance(payload, dict) or "elevation" not in payload:
            raise ProviderFailure('the answer lacks "elevation"')
        value = payload["elevation"]
        if value == "-----":
            return None
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ProviderFailure('the answer\'s "elevation" is not a number')
        try:
            metres = float(value)
        except ValueError:
            raise ProviderFailure('the answer\'s "elevation" is not a number') from None
        if not math.isfinite(metres):
            raise ProviderFailure('the answer\'s "elevation" is not a number')
        return metres, str(payload.get("hsrc") or "")

    def fetch(self, dataset: str, key: str, stop: Any = None) -> dict[str, Any] | None:
        """Return the lowest ground and the slope around one point; None at sea."""
        try:
            return self._fetch(dataset, key)
        except ProviderFailure as exc:
            reason = f"GSI elevation API: {exc.reason}"
            raise ProviderError(dataset, key, reason, exc.detail) from exc

    def _fetch(self, dataset: str, key: str) -> dict[str, Any] | None:
        if dataset != "elevation":
            raise ProviderFailure("no such dataset here", dataset)
        lat, lon = point_of(key)
        here = self.height(lat, lon)
        if here is None:
            return None
        d_lat = SLOPE_STEP_M / METRES_PER_DEGREE_LAT
        d_lon = d_lat / math.cos(math.radians(lat))
        east, north = self.height(lat, lon + d_lon), self.height(lat + d_lat, lon)
        heights = [h for h in (here, east, north) if h is not None]
        rise_e = (east[0] - here[0]) if east else 0.0
        rise_n = (north[0] - here[0]) if north else 0.0
        slope = math.degrees(math.atan(math.hypot(rise_e, rise_n) / SLOPE_STEP_M))
        return {
            "min_m": min(h[0] for h in heights),
            "max_slope_deg": round(slope, 2),
            "source": here[1],
        }

    def source(self, dataset: str) -> dict[str, Any]:
        """Describe where the elevation figures come from, for the report."""
        return {
            "provider": self.name,
            "real": True,
            "service": "GSI elevation API",
            "version": "DEM (5 m laser survey where surveyed, else 10 m)",
            "attribution_en": "Geospatial Information Authority of Japan (GSI), elevation API",
            "attribution_ja": "出典：国土地理院 標高API",
            "url": "https://maps.gsi.go.jp/development/elevation_s.html",
            "date": datetime.now(UTC).date().isoformat(),
        }

    def check(self, lat: float, lon: float) -> dict[str, Any] | None:
        """Ask once about one point (for `flask providers-check`)."""
        try:
            height = self.height(lat, lon)
        except ProviderFailure as exc:
            raise ProviderError("elevation", f"{lat},{lon}", exc.reason, exc.detail) from exc
        return None if height is None else {"elevation_m": height[0], "hsrc": height[1]}
