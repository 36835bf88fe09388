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

The meshes asked are those of an even grid inside the place's outline (sampling.py
mesh_points, at most MESH_BUDGET). ``sstrct`` also gives each mesh's landform class
(``JCODE``, the 250 m mesh landform classification of Wakamatsu and Matsuoka, 2013, which
J-SHIS's ground model is built on): the liquefaction layer maps it to a liquefaction
tendency (LIQUEFACTION_TENDENCY below). The shaking probability is read as published:
it is already the probability at the surface, ground amplification included, so it is
not multiplied by ARV again (J-SHIS's method; its terms of use, Art. 3.3).
"""

from datetime import UTC, datetime
from functools import lru_cache
from typing import Any
from urllib.parse import quote, urlencode

from ..errors import ProviderError, ProviderFailure, UpstreamError
from ..grid.sampling import mesh250, mesh_points, parse_point
from .http import RetryPolicy, get_json

DEFAULT_BASE_URL = "https://www.j-shis.bosai.go.jp/map/api"
ATTRIBUTION_EN = (
    "J-SHIS, National Research Institute for Earth Science and Disaster Resilience (NIED)"
)
ATTRIBUTION_JA = "防災科学技術研究所 J-SHIS（地震ハザードステーション）"
SOFT_GROUND_AVS30 = 200.0  # m/s: below this the top 30 m is soft (Site Class E-like) ground
# NIED's own names of the map versions and cases this app asks for.
# J-SHIS names its probabilistic maps by the date they are evaluated at ("Y2024": the
# probabilistic seismic hazard map as of 1 January 2024), not by HERP's editions of the
# National Seismic Hazard Maps (the latest, 2020).
RELEASES = {
    "Y2024": (
        "確率論的地震動予測地図（2024年1月1日評価）",
        "probabilistic seismic hazard map, evaluated at 2024-01-01",
    ),
    "Y2020": (
        "確率論的地震動予測地図（2020年1月1日評価）",
        "probabilistic seismic hazard map, evaluated at 2020-01-01",
    ),
}
CASES = {"AVR": ("平均ケース", "average case"), "MAX": ("最大ケース", "maximum case")}
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
        """Return the distinct 250 m meshes of an even grid inside the area's outline."""
        return mesh_keys(area)

    def origin(self, dataset: str) -> str:
        """Name J-SHIS by its base URL and the map version asked."""
        version = self.ground_version if dataset == "ground" else f"{self.version}/{self.case}"
        return f"jshis {self.base_url} {version}"

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
        jcode = int(_number(properties, "JCODE"))
        if jcode not in LANDFORMS:
            raise ProviderFailure("the answer's landform class is not one of J-SHIS's", str(jcode))
        return {
            "amplification": _number(properties, "ARV"),
            "soft_soil_ratio": 1.0 if avs30 < SOFT_GROUND_AVS30 else 0.0,
            "jcode": jcode,
        }

    def source(self, dataset: str) -> dict[str, Any]:
        """Describe where this dataset's figures come from, for the report."""
        if dataset == "faults":
            release = RELEASES.get(self.version, (self.version, self.version))
            case = CASES.get(self.case, (self.case, self.case))
            version_ja = f"{release[0]}・{case[0]}"
            version_en = f"{release[1]}, {case[1]} ({self.version} {self.case}, T30_I55_PS)"
        else:
            version_ja = f"表層地盤 {self.ground_version}"
            version_en = f"shallow ground {self.ground_version} (JCODE, ARV, AVS)"
        return {
            "version_ja": version_ja,
            "version_en": version_en,
            "dataset_id": "pshm" if dataset == "faults" else "sstrct",
            "provider": self.name,
            "real": True,
            "service": "J-SHIS",
            "version": version_en,
            "attribution_en": ATTRIBUTION_EN,
            "attribution_ja": ATTRIBUTION_JA,
            "url": "https://www.j-shis.bosai.go.jp/",
            "date": datetime.now(UTC).date().isoformat(),
        }

    def check(self, lat: float, lon: float) -> dict[str, Any] | None:
        """Ask once about the mesh of one point (for `flask providers-check`)."""
        return self.fetch("faults", mesh250(lat, lon))


def mesh_keys(area: Any) -> list[str]:
    """Return the 250 m meshes asked for an area: an even grid inside its outline."""
    return list(_mesh_keys(area))


@lru_cache(maxsize=32)
def _mesh_keys(area: Any) -> tuple[str, ...]:
    # Kept per area (an area is a frozen value): a job asks three times, 3-6 ms each for a
    # city, and 32 reports started at one moment asked beside the poll (bench rows 2d-2j).
    from ..registers.outlines import outline_of

    points = mesh_points(outline_of(area).geometry)
    return tuple(dict.fromkeys(mesh250(lat, lon) for lat, lon in points))


# J-SHIS's landform classes (JCODE; Wakamatsu and Matsuoka's 250 m mesh classification).
LANDFORMS = {
    0: ("分類なし", "no landform class (sea, or not classified)"),
    1: ("山地", "mountain"),
    2: ("山麓地", "mountain footslope"),
    3: ("丘陵", "hill"),
    4: ("火山地", "volcano"),
    5: ("火山山麓地", "volcanic footslope"),
    6: ("火山性丘陵", "volcanic hill"),
    7: ("岩石台地", "rocky terrace"),
    8: ("砂礫質台地", "gravelly terrace"),
    9: ("ローム台地", "loam terrace"),
    10: ("谷底低地", "valley bottom lowland"),
    11: ("扇状地", "alluvial fan"),
    12: ("自然堤防", "natural levee"),
    13: ("後背湿地", "back marsh"),
    14: ("旧河道", "former river channel"),
    15: ("三角州・海岸低地", "delta and coastal lowland"),
    16: ("砂州・砂礫州", "sand bar and gravel bar"),
    17: ("砂丘", "sand dune"),
    18: ("砂州・砂丘間低地", "lowland between sand bars or dunes"),
    19: ("干拓地", "reclaimed land (drained)"),
    20: ("埋立地", "reclaimed land (filled)"),
    21: ("磯・岩礁", "rocky shore and reef"),
    22: ("河原", "river bed"),
    23: ("河道", "river channel"),
    24: ("湖沼", "lake and marsh"),
}
# The liquefaction tendency of each landform (every JCODE, 0 to 24, placed). The groups
# follow the landforms' liquefaction rates in Matsuoka, Wakamatsu and Hashimoto (2011,
# 日本地震工学会論文集 11(2), 20-39), the method MLIT's 「地形区分に基づく液状化の発生傾向図」
# reclassifies Wakamatsu and Matsuoka's 250 m landform data with: "high" for the landforms
# that liquefied most (reclaimed land, former river channels and ponds, sand dunes, sand
# and gravel bars, drained land, deltas and coastal lowland) and the lowland between bars
# and dunes and river beds; "moderate" for natural levees, back marshes and valley-bottom
# lowland; "low" for fans; "very_low" for mountains, hills, terraces and rocky shores;
# water has no tendency of its own; JCODE 0 (no class) is not mapped. docs/providers.md
# says what is and is not checked of this table.
LIQUEFACTION_TENDENCY = {
    0: "not_mapped",
    **dict.fromkeys((1, 2, 3, 4, 5, 6, 7, 8, 9, 21), "very_low"),
    **dict.fromkeys((11,), "low"),
    **dict.fromkeys((10, 12, 13), "moderate"),
    **dict.fromkeys((14, 15, 16, 17, 18, 19, 20, 22), "high"),
    **dict.fromkeys((23, 24), "water"),
}
assert set(LIQUEFACTION_TENDENCY) == set(LANDFORMS) == set(range(25))


def point_of(key: str) -> tuple[float, float]:
    """Read a point key, turning a bad one into a provider failure."""
    try:
        return parse_point(key)
    except ValueError:
        raise ProviderFailure("not a point", key) from None
