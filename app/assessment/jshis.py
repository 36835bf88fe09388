"""J-SHIS (NIED's Japan Seismic Hazard Information Station): shaking and ground, per 250 m mesh.

Two documented GeoJSON APIs (https://www.j-shis.bosai.go.jp/en/api-list), both asked by
250 m mesh code, so two jobs whose sample points fall in one mesh share one call:
- ``pshm/{version}/{case}/TTL_MTTL/meshinfo.geojson?meshcode=..&attr=T30_I55_PS``: the
  probability of JMA intensity 6-lower or more within 30 years, all earthquakes
  (TTL_MTTL), for the configured map version (Y2024, ...) and case (AVR or MAX);
- ``sstrct/{version}/meshinfo.geojson?meshcode=..``: the shallow ground of the mesh:
  ``ARV`` (amplification of peak velocity, engineering bedrock to surface) and ``AVS``
  (AVS30, the average S-wave velocity of the top 30 m, m/s).
A normal answer is a FeatureCollection with ``"status": "Success"`` whose first feature's
``properties`` hold the attributes, as numbers or as "%.6f" strings. HTTP 400 (a bad
parameter), 403 (the request limit), 404 (no such mesh) and 5xx are the documented errors.
A mesh without data (404, or AVS 0 for water) is no answer, not a failure: the layer reads
the points that have data and fails only when none has.
"""

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from .sampling import mesh250, parse_point, sample_points
from .upstream import ProviderError, ProviderFailure, RetryPolicy, UpstreamError, get_json

DEFAULT_BASE_URL = "https://www.j-shis.bosai.go.jp/map/api"
ATTRIBUTION_EN = (
    "J-SHIS, National Research Institute for Earth Science and Disaster Resilience (NIED)"
)
ATTRIBUTION_JA = "防災科学技術研究所 J-SHIS（地震ハザードステーション）"
SOFT_GROUND_AVS30 = 200.0  # m/s: below this the top 30 m is soft (Site Class E-like) ground
REASONS = {
    400: "the service refused the request as malformed (HTTP 400)",
    403: "the service refused the request: its request limit is reached (HTTP 403)",
}


def _number(properties: dict[str, Any], name: str) -> float:
    value = properties.get(name)
    if isinstance(value, bool):
        raise ProviderFailure(f'the answer lacks the number "{name}"')
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ProviderFailure(f'the answer lacks the number "{name}"') from None


def _properties(payload: Any) -> dict[str, Any]:
    if not isinstance(payload, dict):
        raise ProviderFailure("the answer is not a GeoJSON object")
    status = payload.get("status")
    if status != "Success":
        raise ProviderFailure(
            "the service answered an error", f"status={status!r} {payload.get('error')!r}"
        )
    features = payload.get("features")
    if not isinstance(features, list) or not features:
        raise ProviderFailure("the answer holds no mesh")
    properties = features[0].get("properties") if isinstance(features[0], dict) else None
    if not isinstance(properties, dict):
        raise ProviderFailure("the answer's mesh has no properties")
    return properties


class JshisProvider:
    """Shaking probability (faults) and ground amplification (ground) from J-SHIS."""

    name = "jshis"
    is_demo = False
    datasets = ("faults", "ground")

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        version: str = "Y2024",
        case: str = "AVR",
        ground_version: str = "V4",
        policy: RetryPolicy | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.version, self.case, self.ground_version = version, case, ground_version
        self.policy = policy or RetryPolicy()

    def keys(self, area: Any, dataset: str) -> list[str]:
        """Return the distinct 250 m meshes of the area's sample points."""
        return list(dict.fromkeys(mesh250(lat, lon) for lat, lon in sample_points(area)))

    def url(self, dataset: str, mesh: str) -> str:
        """Return the documented request URL for one dataset of one mesh."""
        if dataset == "faults":
            path = f"pshm/{quote(self.version)}/{quote(self.case)}/TTL_MTTL/meshinfo.geojson"
            query = {"meshcode": mesh, "attr": "T30_I55_PS"}
        else:
            path = f"sstrct/{quote(self.ground_version)}/meshinfo.geojson"
            query = {"meshcode": mesh}
        return f"{self.base_url}/{path}?{urlencode(query)}"

    def fetch(self, dataset: str, key: str, stop: Any = None) -> dict[str, Any] | None:
        """Ask J-SHIS about one mesh; None when it has no data there."""
        try:
            return self._fetch(dataset, key)
        except ProviderFailure as exc:
            raise ProviderError(dataset, key, f"J-SHIS: {exc.reason}", exc.detail) from exc

    def _fetch(self, dataset: str, key: str) -> dict[str, Any] | None:
        if dataset not in self.datasets or not (key.isdigit() and len(key) == 10):
            raise ProviderFailure("no such dataset or mesh here", f"{dataset}/{key}")
        try:
            payload = get_json(self.url(dataset, key), self.policy)
        except UpstreamError as exc:
            if exc.status == 404:
                return None
            raise ProviderFailure(REASONS.get(exc.status or 0, exc.reason), exc.detail) from exc
        properties = _properties(payload)
        if dataset == "faults":
            probability = _number(properties, "T30_I55_PS")
            if not 0.0 <= probability <= 1.0:
                raise ProviderFailure("the answer's probability is not between 0 and 1")
            return {"shaking_prob_30y": probability}
        avs30 = _number(properties, "AVS")
        if avs30 <= 0:  # water: no ground to speak of
            return None
        return {
            "amplification": _number(properties, "ARV"),
            "soft_soil_ratio": 1.0 if avs30 < SOFT_GROUND_AVS30 else 0.0,
        }

    def source(self, dataset: str) -> dict[str, Any]:
        """Describe where this dataset's figures come from, for the report."""
        version = (
            f"{self.version} {self.case}"
            if dataset == "faults"
            else f"shallow ground {self.ground_version}"
        )
        return {
            "provider": self.name,
            "real": True,
            "service": "J-SHIS",
            "version": version,
            "attribution_en": ATTRIBUTION_EN,
            "attribution_ja": ATTRIBUTION_JA,
            "url": "https://www.j-shis.bosai.go.jp/",
            "date": datetime.now(UTC).date().isoformat(),
        }

    def check(self, lat: float, lon: float) -> dict[str, Any] | None:
        """Ask once about the mesh of one point (for `flask providers-check`)."""
        return self.fetch("faults", mesh250(lat, lon))


def point_of(key: str) -> tuple[float, float]:
    """Read a point key, turning a bad one into a provider failure."""
    try:
        return parse_point(key)
    except ValueError:
        raise ProviderFailure("not a point", key) from None
