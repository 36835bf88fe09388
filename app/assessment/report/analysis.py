"""From what the layers read to hazard levels, an overall score and a short narrative.

Flood, tsunami and landslide read the designated zones of the hazard map portal over the
place's outline (shares of the area per legend class); liquefaction the landform class of
the 250 m meshes inside it; seismic J-SHIS's 30-year probability of strong shaking there.
Each layer's level, 1 (very low) to 5 (very high), follows from those shares by the rules
below (SIGNIFICANT, DEPTH_LEVEL, the landslide, liquefaction and shaking rules); its index
is the middle of that level's fifth of 0 to 1. The overall level is the
worst layer's, and the score, 0 to 100, lies in that level's band (see headline.py): the
score, its label and the worst layer agree by construction. Everything here is
deterministic, so the same inputs always give the same report.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..place.area import Area
from .headline import band, headline

LABELS = {
    "en": ("Very low", "Low", "Moderate", "High", "Very high"),
    "ja": ("非常に低い", "低い", "中程度", "高い", "非常に高い"),
}
LANGS = tuple(LABELS)

Numbers = dict[str, float]


# The level rules, documented in the report and in docs/providers.md. A class counts as
# present in a place when it covers at least SIGNIFICANT of the area read: a few pixels
# of a zone along the edge of a large city must not decide its level (they still show on
# the map and in the shares, and make it level 2 at least).
SIGNIFICANT = 0.01
DEPTH_LEVEL = {1: 2, 2: 3, 3: 4, 4: 5, 5: 5, 6: 5}  # legend rank of the depth -> level
# J-SHIS's legend bands of the 30-year probability of JMA intensity 6-lower or more.
SHAKING_BANDS = (
    ("lt0.1", 0.001, "under 0.1 %", "0.1%未満"),
    ("0.1-3", 0.03, "0.1 to 3 %", "0.1〜3%"),
    ("3-6", 0.06, "3 to 6 %", "3〜6%"),
    ("6-26", 0.26, "6 to 26 %", "6〜26%"),
    ("ge26", 2.0, "26 % or more", "26%以上"),
)
TENDENCIES = (
    ("very_low", "very low", "非常に低い"),
    ("low", "low", "低い"),
    ("moderate", "moderate", "やや高い"),
    ("high", "high", "高い"),
    ("water", "water", "水域"),
)
NOT_MAPPED = "not_mapped"


def index_of(level: int) -> float:
    """Return the index (0 to 1) that stands for a level: the middle of its fifth."""
    return round((level - 1) / 5 + 0.1, 3)


def _zone_row(answer: Mapping[str, Any], legend: Sequence[Any]) -> dict[str, Any]:
    counts = answer["counts"]
    total = sum(counts.values()) or 1
    shares = {key: round(count / total, 4) for key, count in counts.items()}
    present = [zone for zone in legend if counts.get(zone.key, 0) > 0]
    significant = [zone for zone in present if counts[zone.key] / total >= SIGNIFICANT]
    return {
        "shares": shares,
        "present": present,
        "significant": significant,
        "zoned": round(sum(counts.get(z.key, 0) for z in legend) / total, 4),
    }


def _depth(fetched: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    from ..sources.portal import ZONE_DATASETS
    from ..sources.tiles import LEGENDS

    (dataset,) = fetched
    answer = fetched[dataset][0]
    legend = LEGENDS[ZONE_DATASETS[dataset]]
    row = _zone_row(answer, legend)
    if row["significant"]:
        level = DEPTH_LEVEL[max(zone.rank for zone in row["significant"])]
    else:
        level = 2 if row["present"] else 1
    worst = max(row["present"], key=lambda zone: zone.rank).key if row["present"] else None
    return {
        "index": index_of(level),
        "numbers": {"zone_share": row["zoned"]},
        "shares": row["shares"],
        "worst": worst,
        "mapped": True,
        "maps": {dataset: answer["rects"]},
    }


def _landslide(fetched: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    from ..sources.portal import ZONE_DATASETS
    from ..sources.tiles import LEGENDS

    shares: dict[str, float] = {}
    present: list[Any] = []
    warning = special = 0.0
    worst = None
    for dataset, answers in fetched.items():
        legend = LEGENDS[ZONE_DATASETS[dataset]]
        row = _zone_row(answers[0], legend)
        shares.update({z.key: row["shares"][z.key] for z in legend})
        present += row["present"]
        warning = max(warning, row["shares"][legend[0].key])
        special = max(special, row["shares"][legend[1].key])
        for zone in row["present"]:
            if worst is None or zone.rank > worst.rank:
                worst = zone
    if special >= 5 * SIGNIFICANT:
        level = 5
    elif special >= SIGNIFICANT:
        level = 4
    elif warning >= SIGNIFICANT:
        level = 3
    else:
        level = 2 if present else 1
    answers0 = [answers[0] for answers in fetched.values()]
    zoned = min(
        1.0, sum(1 - a["counts"]["none"] / (sum(a["counts"].values()) or 1) for a in answers0)
    )
    shares["none"] = round(1 - zoned, 4)
    return {
        "index": index_of(level),
        "numbers": {"warning_share": round(warning, 4), "special_share": round(special, 4)},
        "shares": shares,
        "worst": worst.key if worst else None,
        "mapped": True,
        "maps": {dataset: answers[0]["rects"] for dataset, answers in fetched.items()},
    }


def _mesh_shares(keys: Sequence[str], asked: int) -> dict[str, float]:
    total = asked or 1
    counts: dict[str, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return {key: round(count / total, 4) for key, count in counts.items()}


def _liquefaction(fetched: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    from ..sources.jshis import LIQUEFACTION_TENDENCY

    answers = fetched["ground"]
    with_data = [a for a in answers if not a.get("no_data")]
    tendencies = [LIQUEFACTION_TENDENCY.get(int(a["jcode"]), NOT_MAPPED) for a in with_data]
    per_mesh = {a["key"]: t for a, t in zip(with_data, tendencies, strict=True) if "key" in a}
    tendencies += [NOT_MAPPED] * (len(answers) - len(with_data))
    shares = {key: 0.0 for key, _, _ in TENDENCIES} | _mesh_shares(tendencies, len(answers))
    land = 1 - shares.get("water", 0.0) - shares.get(NOT_MAPPED, 0.0) or 1
    high, moderate = shares["high"] / land, shares["moderate"] / land
    if high >= 0.25:
        level = 5
    elif high >= 0.05:
        level = 4
    elif high + moderate >= 0.25:
        level = 3
    elif high + moderate + shares["low"] > 0:
        level = 2
    else:
        level = 1
    order = ("very_low", "low", "moderate", "high")
    worst = max((t for t in tendencies if t in order), key=order.index, default=None)
    return {
        "index": index_of(level),
        "numbers": {"high_tendency_share": round(high, 4)},
        "shares": shares,
        "worst": worst,
        "mapped": bool(with_data),
        "landforms": sorted({int(a["jcode"]) for a in with_data}),
        "mesh_classes": per_mesh,
    }


def _seismic(fetched: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    answers = [a for a in fetched["faults"] if not a.get("no_data")]
    probabilities = [float(a["shaking_prob_30y"]) for a in answers]
    bands = [next(i for i, b in enumerate(SHAKING_BANDS) if p < b[1]) for p in probabilities]
    keys = [SHAKING_BANDS[i][0] for i in bands]
    per_mesh = {a["key"]: k for a, k in zip(answers, keys, strict=True) if "key" in a}
    shares = {band[0]: 0.0 for band in SHAKING_BANDS} | _mesh_shares(keys, len(fetched["faults"]))
    missing = len(fetched["faults"]) - len(answers)
    if missing:
        shares[NOT_MAPPED] = round(missing / len(fetched["faults"]), 4)
    worst = max(bands)  # the worst place decides, as J-SHIS's map would show it
    return {
        "index": index_of(worst + 1),
        "numbers": {"shaking_prob_30y": max(probabilities)},
        "shares": shares,
        "worst": SHAKING_BANDS[worst][0],
        "mapped": True,
        "mesh_classes": per_mesh,
    }


@dataclass(frozen=True)
class Layer:
    """A hazard layer: its names, the datasets it reads (in order) and how it is read."""

    key: str
    name_en: str
    name_ja: str
    datasets: tuple[str, ...]
    read: Callable[[Mapping[str, Sequence[Mapping[str, Any]]]], dict[str, Any]]
    weight: float


LAYERS: tuple[Layer, ...] = (
    Layer("flood", "Flood", "洪水", ("flood_zones",), _depth, 0.25),
    Layer("tsunami", "Tsunami", "津波", ("tsunami_zones",), _depth, 0.15),
    Layer("liquefaction", "Liquefaction", "液状化", ("ground",), _liquefaction, 0.15),
    Layer(
        "landslide",
        "Landslide",
        "土砂災害",
        ("debris_flow_zones", "steep_slope_zones", "landslide_zones"),
        _landslide,
        0.15,
    ),
    Layer("seismic", "Earthquake shaking", "地震の揺れ", ("faults",), _seismic, 0.30),
)
# What a layer's row carries besides its index and numbers (describe passes them on).
DETAILS = ("shares", "worst", "mapped", "maps", "landforms", "omitted", "legend", "mesh_classes")


def legend_of(key: str) -> list[dict[str, Any]]:
    """Return a layer's classes in order: key, colour, names, and the dataset they are of."""
    from ..sources.portal import ZONE_DATASETS
    from ..sources.tiles import LEGENDS

    layer = next(layer for layer in LAYERS if layer.key == key)
    if key == "liquefaction":
        colours = ("#E8F1DA", "#FFF1A8", "#FFB266", "#E0533D", "#9CC3E6")
        return [
            {"key": k, "colour": c, "en": en, "ja": ja, "rank": i, "dataset": "ground"}
            for i, ((k, en, ja), c) in enumerate(zip(TENDENCIES, colours, strict=True), 1)
        ]
    if key == "seismic":
        colours = ("#F2F2D9", "#FFE599", "#FFB266", "#F47A5A", "#C0392B")
        return [
            {"key": k, "colour": c, "en": en, "ja": ja, "rank": i, "dataset": "faults"}
            for i, ((k, _, en, ja), c) in enumerate(zip(SHAKING_BANDS, colours, strict=True), 1)
        ]
    names = {
        "debris_flow": ("debris flow", "土石流"),
        "steep_slope": ("steep slope", "急傾斜地"),
        "landslide": ("landslide", "地すべり"),
    }
    rows = []
    for dataset in layer.datasets:
        for zone in LEGENDS[ZONE_DATASETS[dataset]]:
            kind = zone.key.rsplit("_", 1)[0]
            en, ja = names.get(kind, ("", ""))
            rows.append(
                {
                    "key": zone.key,
                    "colour": zone.colour,
                    "rank": zone.rank,
                    "dataset": dataset,
                    "en": f"{en}: {zone.label_en}" if en else zone.label_en,
                    "ja": f"{ja}：{zone.label_ja}" if ja else zone.label_ja,
                }
            )
    return rows


def level_of(index: float) -> int:
    """Return the level, 1 to 5, of an index from 0 to 1."""
    return min(5, 1 + int(index * 5))


def analyse(
    area: Area, lang: str, fetched: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]]
) -> dict[str, Any]:
    """Score every layer from its fetched datasets and write the narrative in lang."""
    if lang not in LABELS:
        raise ValueError(f"lang must be one of {LANGS}, not {lang!r}")
    from ..sources.terms import omitted

    scored = []
    for layer in LAYERS:
        if reason := omitted(layer.key, area):
            # Not read: the data's terms forbid this use here. Not scored, said why.
            scored.append(
                {
                    "key": layer.key,
                    "index": 0.0,
                    "numbers": {},
                    "shares": {},
                    "worst": None,
                    "mapped": False,
                    "omitted": reason,
                }
            )
            continue
        scored.append(
            {"key": layer.key, **layer.read(fetched[layer.key]), "legend": legend_of(layer.key)}
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
                # What else the stored row carries (whether its data is real, say) stays:
                # the other language's view is the same report in other words.
                **row,
                "key": layer.key,
                "name_en": layer.name_en,
                "name_ja": layer.name_ja,
                "name": layer.name_ja if lang == "ja" else layer.name_en,
                "level": level,
                "label": LABELS[lang][level - 1],
                "index": row["index"],
                "numbers": dict(row["numbers"]),
                **{k: row[k] for k in DETAILS if k in row},
            }
        )
    # A layer not read (its data's terms forbid the use here) is left out of the headline.
    read = [row for row in layers if row.get("mapped", True)] or layers
    head = headline(read, WEIGHTS)
    score_label = LABELS[lang][head.level - 1]
    return {
        "layers": layers,
        "score": head.score,
        "score_label": score_label,
        "level": head.level,
        "band": list(band(head.level)),
        "worst": list(head.worst),
        "least": list(head.least),
        "narrative": narrative(area, lang, head.score, score_label, read),
    }


WEIGHTS = {layer.key: layer.weight for layer in LAYERS}


def names_of(layers: Sequence[Mapping[str, Any]], keys: Sequence[str], lang: str) -> str:
    """Name the layers with these keys together, as the language lists them."""
    names = [row["name"] if lang == "ja" else row["name"].lower() for row in layers
             if row["key"] in keys]  # fmt: skip
    if lang == "ja":
        return "・".join(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def translate(report: Mapping[str, Any], lang: str) -> dict[str, Any]:
    """Return a stored report written in lang from its own figures: no fetch, no new job."""
    area = Area.from_dict(report["area"])
    return {**report, "lang": lang, **describe(area, lang, report["layers"])}


def narrative(
    area: Area, lang: str, score: int, score_label: str, layers: Sequence[Mapping[str, Any]]
) -> str:
    """Return two or three plain sentences about the score and the extreme layers.

    Layers tied at the worst (or the mildest) level are named together, in report order.
    """
    head = headline(layers, WEIGHTS)
    top = next(row for row in layers if row["key"] == head.worst[0])
    low = next(row for row in layers if row["key"] == head.least[0])
    worst, least = names_of(layers, head.worst, lang), names_of(layers, head.least, lang)
    several = len(head.worst) > 1
    advice = top["level"] >= 4
    if lang == "ja":
        both = "いずれも" if several else ""
        scored = f"総合ハザードスコアは100点中{score}点（{score_label}）です。"
        if top["level"] == low["level"]:
            text = (
                f"{area.prefecture_ja}{area.name_ja}では、すべての項目が同じ"
                f"レベル{top['level']}（{top['label']}）です。{scored}"
            )
        else:
            text = (
                f"{area.prefecture_ja}{area.name_ja}で最も注意が必要なのは{worst}"
                f"（{both}レベル{top['level']}：{top['label']}）です。{scored}"
            )
            both = "いずれも" if len(head.least) > 1 else ""
            text += f"最も低いのは{least}（{both}レベル{low['level']}：{low['label']}）です。"
        if advice:
            return text + "お住まいの市区町村の公式ハザードマップと避難計画も確認してください。"
        return text + "高いレベルの項目はありません。"
    concern = "the greatest concerns are" if several else "the greatest concern is"
    each = "each " if several else ""
    place = f"{area.name_romaji}, {area.prefecture_romaji}"
    scored = f"The overall hazard score is {score} out of 100 ({score_label.lower()}). "
    if top["level"] == low["level"]:
        text = (
            f"In {place} every layer is at the same level, "
            f"{top['level']} ({top['label'].lower()}). {scored}"
        )
    else:
        text = (
            f"In {place} {concern} {worst} "
            f"({each}level {top['level']}, {top['label'].lower()}). {scored}"
        )
        are, each = ("are", "each ") if len(head.least) > 1 else ("is", "")
        text += f"The least {are} {least} ({each}level {low['level']}, {low['label'].lower()}). "
    if advice:
        return text + "Check the municipality's official hazard map and evacuation plan."
    return text + "No layer reaches a high level."
