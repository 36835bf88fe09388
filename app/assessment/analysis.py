"""From upstream numbers to hazard levels, an overall score and a short narrative.

Every layer turns the numbers it reads into an index from 0 (no hazard) to 1, which maps
to a level from 1 (very low) to 5 (very high). The overall score, 0 to 100, is the
weighted mean of the indexes times 100: higher means more hazard. The overall level is
the score's level, raised to one below the worst layer's level when that is higher: a
mean must not hide one very high hazard behind a mild word. Everything here is
deterministic, so the same inputs always give the same report.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .area import Area

LABELS = {
    "en": ("Very low", "Low", "Moderate", "High", "Very high"),
    "ja": ("非常に低い", "低い", "中程度", "高い", "非常に高い"),
}
LANGS = tuple(LABELS)

Numbers = dict[str, float]


def _ramp(value: float, zero_at: float, one_at: float) -> float:
    """Map value linearly to 0 at zero_at and 1 at one_at, clamped to [0, 1]."""
    return min(1.0, max(0.0, (value - zero_at) / (one_at - zero_at)))


def _flood(n: Numbers) -> float:
    return 0.6 * _ramp(n["lowest_elevation_m"], 20, 0) + 0.4 * _ramp(n["max_hourly_mm"], 30, 100)


def _tsunami(n: Numbers) -> float:
    return _ramp(n["lowest_elevation_m"], 15, 0) * _ramp(n["coast_distance_km"], 10, 0)


def _liquefaction(n: Numbers) -> float:
    return 0.7 * n["soft_soil_ratio"] + 0.3 * _ramp(n["lowest_elevation_m"], 10, 0)


def _landslide(n: Numbers) -> float:
    slope = _ramp(n["steepest_slope_deg"], 5, 35)
    return 0.6 * slope + 0.25 * _ramp(n["max_hourly_mm"], 30, 100) + 0.15 * n["soft_soil_ratio"]


def _seismic(n: Numbers) -> float:
    return _ramp(n["shaking_prob_30y"] * n["amplification"], 0.05, 1.2)


@dataclass(frozen=True)
class Layer:
    """A hazard layer: its names, the datasets it reads (in order) and how it scores."""

    key: str
    name_en: str
    name_ja: str
    datasets: tuple[str, ...]
    uses: tuple[str, ...]  # the numbers its index reads
    index: Callable[[Numbers], float]
    weight: float


LAYERS: tuple[Layer, ...] = (
    Layer(
        "flood",
        "Flood",
        "洪水",
        ("elevation", "rainfall"),
        ("lowest_elevation_m", "max_hourly_mm"),
        _flood,
        0.25,
    ),
    Layer(
        "tsunami",
        "Tsunami",
        "津波",
        ("elevation", "coast"),
        ("lowest_elevation_m", "coast_distance_km"),
        _tsunami,
        0.15,
    ),
    Layer(
        "liquefaction",
        "Liquefaction",
        "液状化",
        ("elevation", "ground"),
        ("soft_soil_ratio", "lowest_elevation_m"),
        _liquefaction,
        0.15,
    ),
    Layer(
        "landslide",
        "Landslide",
        "土砂災害",
        ("elevation", "ground", "rainfall"),
        ("steepest_slope_deg", "max_hourly_mm", "soft_soil_ratio"),
        _landslide,
        0.15,
    ),
    Layer(
        "seismic",
        "Earthquake shaking",
        "地震の揺れ",
        ("ground", "faults"),
        ("shaking_prob_30y", "amplification"),
        _seismic,
        0.30,
    ),
)


# How several answers for one field (one per tile or sample point) become one number: the
# worst place decides, except the share of soft ground, which is the share over places.
REDUCE: dict[str, Callable[[Sequence[float]], float]] = {
    "min_m": min,
    "max_slope_deg": max,
    "max_hourly_mm": max,
    "coast_distance_km": min,
    "soft_soil_ratio": lambda values: sum(values) / len(values),
    "amplification": max,
    "shaking_prob_30y": max,
}
RENAMED = {"min_m": "lowest_elevation_m", "max_slope_deg": "steepest_slope_deg"}


def summarise(fetched: Mapping[str, Sequence[Mapping[str, Any]]]) -> Numbers:
    """Reduce each dataset's answers (one per tile, point or area) to named numbers."""
    numbers: Numbers = {}
    for answers in fetched.values():
        for field, reduce in REDUCE.items():
            values = [float(a[field]) for a in answers if field in a]
            if values:
                numbers[RENAMED.get(field, field)] = reduce(values)
    return numbers


def level_of(index: float) -> int:
    """Return the level, 1 to 5, of an index from 0 to 1."""
    return min(5, 1 + int(index * 5))


def analyse(
    area: Area, lang: str, fetched: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]]
) -> dict[str, Any]:
    """Score every layer from its fetched datasets and write the narrative in lang."""
    if lang not in LABELS:
        raise ValueError(f"lang must be one of {LANGS}, not {lang!r}")
    scored = []
    for layer in LAYERS:
        numbers = summarise(fetched[layer.key])
        scored.append(
            {
                "key": layer.key,
                "index": round(layer.index(numbers), 3),
                "numbers": {name: round(numbers[name], 2) for name in layer.uses},
            }
        )
    return describe(area, lang, scored)


def describe(area: Area, lang: str, scored: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Write a report's levels, score and narrative in lang from its language-free figures.

    Only the stored index and numbers of each layer are read, so a stored report can be
    written again in the other language without fetching anything (see translate).
    """
    if lang not in LABELS:
        raise ValueError(f"lang must be one of {LANGS}, not {lang!r}")
    by_key = {row["key"]: row for row in scored}
    layers = []
    for layer in LAYERS:
        row = by_key[layer.key]
        level = level_of(row["index"])
        layers.append(
            {
                "key": layer.key,
                "name_en": layer.name_en,
                "name_ja": layer.name_ja,
                "name": layer.name_ja if lang == "ja" else layer.name_en,
                "level": level,
                "label": LABELS[lang][level - 1],
                "index": row["index"],
                "numbers": dict(row["numbers"]),
            }
        )
    weighted = sum(layer.weight * row["index"] for layer, row in zip(LAYERS, layers, strict=True))
    score = round(100 * weighted / sum(layer.weight for layer in LAYERS))
    score_label = LABELS[lang][overall_level(score, layers) - 1]
    return {
        "layers": layers,
        "score": score,
        "score_label": score_label,
        "narrative": narrative(area, lang, score, score_label, layers),
    }


def overall_level(score: int, layers: Sequence[Mapping[str, Any]]) -> int:
    """Return the overall level: the score's, but never milder than the worst layer allows."""
    worst = max(row["level"] for row in layers)
    return max(level_of(score / 100), worst - 1)


def translate(report: Mapping[str, Any], lang: str) -> dict[str, Any]:
    """Return a stored report written in lang from its own figures: no fetch, no new job."""
    area = Area.from_dict(report["area"])
    return {**report, "lang": lang, **describe(area, lang, report["layers"])}


def narrative(
    area: Area, lang: str, score: int, score_label: str, layers: Sequence[Mapping[str, Any]]
) -> str:
    """Return two or three plain sentences about the score and the extreme layers."""
    top = max(layers, key=lambda row: row["index"])  # the first of equals, so stable
    low = min(layers, key=lambda row: row["index"])
    advice = top["level"] >= 4
    if lang == "ja":
        text = (
            f"{area.prefecture_ja}{area.name_ja}で最も注意が必要なのは{top['name']}"
            f"（レベル{top['level']}：{top['label']}）です。"
            f"総合ハザードスコアは100点中{score}点（{score_label}）です。"
        )
        if top["level"] == low["level"]:
            text += f"すべての項目がレベル{top['level']}（{top['label']}）です。"
        else:
            text += f"最も低いのは{low['name']}（レベル{low['level']}：{low['label']}）です。"
        if advice:
            return text + "お住まいの市区町村の公式ハザードマップと避難計画も確認してください。"
        return text + "高いレベルの項目はありません。"
    text = (
        f"In {area.name_romaji}, {area.prefecture_romaji} the greatest concern is "
        f"{top['name'].lower()} (level {top['level']}, {top['label'].lower()}). "
        f"The overall hazard score is {score} out of 100 ({score_label.lower()}). "
    )
    if top["level"] == low["level"]:
        text += f"Every layer is at level {top['level']} ({top['label'].lower()}). "
    else:
        text += (
            f"The least is {low['name'].lower()} (level {low['level']}, {low['label'].lower()}). "
        )
    if advice:
        return text + "Check the municipality's official hazard map and evacuation plan."
    return text + "No layer reaches a high level."
