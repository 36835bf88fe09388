"""From what the layers read to hazard levels, an overall score and a short narrative.

Flood (at the planned maximum and, shown only, the planned scale), tsunami, storm surge,
inland flooding, house collapse, flood duration and landslide read the designated zones of
the hazard map portal over the place's outline (shares of the area per legend class);
liquefaction the landform class of the 250 m meshes inside it;
seismic J-SHIS's 30-year probability of strong shaking there.
Each layer's level, 1 (very low) to 5 (very high), follows from those shares by the rules
below (SIGNIFICANT, DEPTH_LEVEL, the landslide, liquefaction and shaking rules); its index
is the middle of that level's fifth of 0 to 1. The overall level is the
worst layer's, and the score, 0 to 100, lies in that level's band (see headline.py): the
score, its label and the worst layer agree by construction. Everything here is
deterministic, so the same inputs always give the same report.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..place.addresses import street_en
from ..place.area import Area
from .actions import todo
from .headline import Headline, band, headline

LABELS = {
    "en": ("Very low", "Low", "Moderate", "High", "Very high"),
    "ja": ("非常に低い", "低い", "中程度", "高い", "非常に高い"),
}
LANGS = tuple(LABELS)

Numbers = dict[str, float]


# The level rules, documented in the report and in docs/providers.md. A zone layer's level
# is the level of the worst class present (ZoneClass.level: depth under 0.5 m 2, 0.5-3 m 3,
# 3-5 m 4, 5 m or more 5; landslide warning 3, special warning 5, planned one below). A
# class is present when at least NOISE_PIXELS of its pixels lie inside the area: a floor
# against stray pixels, not a share, so 10 km2 of deep water in a large city still counts.
# The shares say how much. No class present: state "no_zone", and no level at all.
NOISE_PIXELS = 4
# A layer's state: zones found, none found, no open data for the prefecture, not read
# (the data's terms), a mesh layer read (liquefaction, shaking), or a mesh layer whose
# meshes hold no land with a class (water, unclassified or no answer): no level then.
ZONES, NO_ZONE, NOT_PUBLISHED = "zones", "no_zone", "not_published"
OMITTED, READ, NO_DATA = "omitted", "read", "no_data"
# A zone layer whose tiles hold colours of no legend class that are not anti-aliased edges
# (tiles.stray_colours), NOISE_PIXELS or more, and no known class: they could be any class,
# the worst too, so the layer has no level (never a lower one) and the report says why.
# With a known class as well, that class's level stands as the least it can be (a known
# special warning zone never leaves the headline for a few stray pixels) and the report
# says it could be worse.
UNCERTAIN = "uncertain"
# A zone layer whose classes set no level (flood duration: how long the water stays; the
# planned scale: a smaller, more frequent flood than the planned maximum weighed as flood):
# a detail of flood, its zones shown, with the worst class found, and not weighed.
SHOWN = "shown"
SHOWN_LABELS = {
    "flood_duration": {
        "en": "Longest: {} (a detail of flood: shown, not weighed)",
        "ja": "最も長い区分：{}（洪水の詳細として示し、レベルには数えません）",
    },
    "flood_planned": {
        "en": "Deepest: {} (a detail of flood: shown, not weighed)",
        "ja": "最も深い区分：{}（洪水の詳細として示し、レベルには数えません）",
    },
}
SHOWN_LABEL = SHOWN_LABELS["flood_duration"]
STATE_LABELS = {
    NO_ZONE: (
        "No designated zone found (not necessarily safe: the data may not be prepared)",
        "指定区域は見つかりませんでした（安全とは限りません。データが未整備の場合があります）",
    ),
    NOT_PUBLISHED: (
        "Not published for this prefecture",
        "この都道府県の公開データはありません",
    ),
    OMITTED: ("Not read (the data's terms of use)", "読み取っていません（データの利用条件）"),
    UNCERTAIN: (
        "Uncertain: the tiles hold colours not in the legend, which could be a worse class",
        "判定できません：凡例にない色があり、より高い区分の可能性があります",
    ),
    NO_DATA: (
        "No data on land (water or not classified)",
        "陸域のデータがありません（水域または分類なし）",
    ),
    SHOWN: ("Shown, not weighed (a detail of flood)", "洪水の詳細として示し、レベルには数えません"),
}
AT_LEAST = {
    "en": " (at least: colours not in the legend could be a worse class)",
    "ja": "（以上：凡例にない色があり、より高い区分の可能性があります）",
}
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
    shares = {key: round(count / total, 6) for key, count in counts.items()}
    present = [z for z in legend if not z.border and counts.get(z.key, 0) >= NOISE_PIXELS]
    stray = dict(answer.get("stray") or {})
    # Tiles off an unconfirmed legend (answer["unreadable"]): every colour off it counts,
    # however few, as the layer could not be read by that legend at all.
    if sum(stray.values()) < NOISE_PIXELS and not answer.get("unreadable"):
        stray = {}
    unreadable = answer.get("unreadable")
    return {"shares": shares, "present": present, "total": total, "stray": stray,
            **({"unreadable": unreadable} if unreadable else {})}  # fmt: skip


def _zones_result(
    rows: Sequence[tuple[str, Mapping[str, Any], dict[str, Any]]],
) -> dict[str, Any]:
    """Return a zone layer's reading from its datasets' rows: the worst class decides."""
    shares: dict[str, float] = {}
    present = []
    for _, _, row in rows:
        shares.update(row["shares"])
        present += row["present"]
    if len(rows) > 1:  # several datasets: "no zone" is the part no dataset paints
        painted = sum(1 - row["shares"].get("none", 1.0) for _, _, row in rows)
        shares["none"] = round(max(0.0, 1 - painted), 6)
        shares["other"] = round(sum(row["shares"].get("other", 0.0) for _, _, row in rows), 6)
    worst = max(present, key=lambda zone: (zone.level, zone.rank), default=None)
    level = (worst.level or None) if worst else None
    stray = {dataset: row["stray"] for dataset, _, row in rows if row.get("stray")}
    off = {dataset: row["unreadable"] for dataset, _, row in rows if row.get("unreadable")}
    state = (ZONES if level else SHOWN) if worst else UNCERTAIN if stray else NO_ZONE
    return {
        "state": state,
        "index": index_of(level) if level else None,
        **({"stray": stray} if stray else {}),
        **({"unreadable": off} if off else {}),
        "numbers": {"worst_class_share": shares[worst.key]} if worst else {},
        "shares": shares,
        "worst": worst.key if worst else None,
        "mapped": True,
        "maps": {dataset: answer["rects"] for dataset, answer, _ in rows},
    }


def _zones(fetched: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    from ..grid.tiles import LEGENDS
    from ..sources.portal import ZONE_DATASETS

    rows = []
    for dataset, answers in fetched.items():
        legend = LEGENDS[ZONE_DATASETS[dataset]]
        rows.append((dataset, answers[0], _zone_row(answers[0], legend)))
    return _zones_result(rows)


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
    low = shares["low"] / land
    # The share that decides the level is the one shown beside it.
    if high >= 0.05:
        level, deciding = (5 if high >= 0.25 else 4), {"high_tendency_share": round(high, 4)}
    elif high + moderate >= 0.25:
        level, deciding = 3, {"moderate_or_high_share": round(high + moderate, 4)}
    else:
        level = 2 if high + moderate + low > 0 else 1
        deciding = {"low_or_more_share": round(high + moderate + low, 4)}
    order = ("very_low", "low", "moderate", "high")
    worst = max((t for t in tendencies if t in order), key=order.index, default=None)
    land = worst is not None  # no mesh of land with a tendency: no level, never "very low"
    return {
        "index": index_of(level) if land else None,
        "state": READ if land else NO_DATA,
        "numbers": deciding if land else {},
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
        "state": READ,
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
    Layer("flood", "Flood", "洪水", ("flood_zones",), _zones, 0.25),
    # The planned scale (計画規模): a flood of about once in 10 to 100 years, smaller and
    # more frequent than the planned maximum flood weighs; its classes set no level, so it
    # is shown as a detail of flood, never weighed (docs/providers.md, "The headline").
    Layer(
        "flood_planned",
        "Flood (planned scale)",
        "洪水（計画規模）",
        ("flood_planned_zones",),
        _zones,
        0,
    ),
    Layer("tsunami", "Tsunami", "津波", ("tsunami_zones",), _zones, 0.15),
    # Storm surge and inland flooding are water over the land on the same depth scale and
    # level rule as flood, and weigh as flood does (docs/providers.md, "The headline").
    Layer("storm_surge", "Storm surge", "高潮", ("storm_surge_zones",), _zones, 0.25),
    Layer("inland_flood", "Inland flooding", "内水氾濫", ("inland_flood_zones",), _zones, 0.25),
    # House collapse: two datasets (the flow of flood water, an eroding bank), one question a
    # buyer asks (can the house itself be brought down?) and one answer (leave early); a
    # zone is level 5 and weighs as flood does. Flood duration is a detail of flood: its
    # classes set no level, so it is shown and never weighed (docs/providers.md).
    Layer(
        "house_collapse",
        "House-collapse zone",
        "家屋倒壊等氾濫想定区域",
        ("house_collapse_flow_zones", "house_collapse_bank_zones"),
        _zones,
        0.25,
    ),
    Layer("flood_duration", "Flood duration", "浸水継続時間", ("flood_duration_zones",), _zones, 0),
    Layer("liquefaction", "Liquefaction", "液状化", ("ground",), _liquefaction, 0.15),
    Layer(
        "landslide",
        "Landslide",
        "土砂災害",
        ("debris_flow_zones", "steep_slope_zones", "landslide_zones"),
        _zones,
        0.15,
    ),
    Layer("seismic", "Earthquake shaking", "地震の揺れ", ("faults",), _seismic, 0.30),
)
# What a layer's row carries besides its index and numbers (describe passes them on).
DETAILS = (
    "shares", "worst", "mapped", "maps", "landforms", "omitted", "legend", "mesh_classes",
    "state", "reason", "reason_ja", "notes", "stray", "unreadable",
)  # fmt: skip


def legend_of(key: str) -> list[dict[str, Any]]:
    """Return a layer's classes in order: key, colour, names, and the dataset they are of."""
    from ..grid.tiles import LEGENDS
    from ..sources.portal import ZONE_DATASETS

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
    rows = []
    for dataset in layer.datasets:
        for zone in LEGENDS[ZONE_DATASETS[dataset]]:
            if zone.border:
                continue  # recognised on tiles, not a class a reader is shown
            en, ja = class_names(zone)
            rows.append(
                {
                    "key": zone.key,
                    "colour": zone.colour,
                    "rank": zone.rank,
                    "level": zone.level,
                    "planned": zone.planned,
                    "source": zone.source,
                    "dataset": dataset,
                    "en": en,
                    "ja": ja,
                }
            )
    return rows


ZONE_KINDS = {
    "debris_flow": ("debris flow", "土石流"),
    "steep_slope": ("steep slope", "急傾斜地"),
    "landslide": ("landslide", "地すべり"),
}


def class_names(zone: Any) -> tuple[str, str]:
    """Return a zone class's name in English and Japanese, its kind of landslide first."""
    kind = next((k for k in ZONE_KINDS if zone.key.startswith(k + "_")), "")
    if not kind:
        return zone.label_en, zone.label_ja
    en, ja = ZONE_KINDS[kind]
    return f"{en}: {zone.label_en}", f"{ja}：{zone.label_ja}"


def worded(at_point: Mapping[str, Any]) -> dict[str, Any]:
    """Return a stored at_point in words: reports once stored a border's raw key as its name."""
    from ..grid.tiles import LEGENDS

    key = at_point["key"]
    if at_point.get("en") != key:
        return dict(at_point)
    zone = next((z for legend in LEGENDS.values() for z in legend if z.key == key), None)
    if zone is None:
        return dict(at_point)
    en, ja = class_names(zone)
    return {**at_point, "en": en, "ja": ja}


def level_of(index: float) -> int:
    """Return the level, 1 to 5, of an index from 0 to 1."""
    return min(5, 1 + int(index * 5))


def analyse(
    area: Area, lang: str, fetched: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]]
) -> dict[str, Any]:
    """Score every layer from its fetched datasets and write the narrative in lang."""
    if lang not in LABELS:
        raise ValueError(f"lang must be one of {LANGS}, not {lang!r}")
    from ..sources.coverage import notes, unread

    scored = []
    for layer in LAYERS:
        state, reason, reason_ja = unread(layer.key, area)
        if state:
            # Not read: the data's terms forbid this use here, or the dataset has no open
            # delivery for the prefecture. No level, and the reason said.
            scored.append(
                {
                    "key": layer.key,
                    "state": state,
                    "reason": reason,
                    "reason_ja": reason_ja,
                    "index": None,
                    "numbers": {},
                    "shares": {},
                    "worst": None,
                    "mapped": False,
                    **({"omitted": reason} if state == OMITTED else {}),
                }
            )
            continue
        row = {"key": layer.key, **layer.read(fetched[layer.key]), "legend": legend_of(layer.key)}
        layer_notes = notes(layer.key, area) + off_legend_notes(row.get("unreadable") or {})
        if layer_notes:
            row["notes"] = layer_notes
        scored.append(row)
    return describe(area, lang, scored)


OFF_LEGEND = {
    "en": (
        "The {path} tiles are painted in colours not in the legend public projects record"
        " for them ({share:.0%} of the painted pixels): that legend is not confirmed against"
        " the portal's, so this layer is never read as a lower level than its colours show,"
        " and our operators are asked to check it."
    ),
    "ja": (
        "{path}のタイルには、公開されている他のプロジェクトが記録した凡例にない色があります"
        "（着色された画素の{share:.0%}）。この凡例はポータルの凡例と照合できていないため、"
        "色から分かるより低いレベルとはしません。運営者に確認を依頼します。"
    ),
}


def off_legend_notes(unreadable: Mapping[str, Mapping[str, Any]]) -> list[dict[str, str]]:
    """Say, per dataset whose tiles are off its unconfirmed legend, why its layer is uncertain."""
    from ..grid.tiles import UNCONFIRMED_SOURCE

    today = datetime.now(UTC).date().isoformat()  # the report's dates are UTC's
    return [
        {
            **{lang: OFF_LEGEND[lang].format(**off) for lang in LANGS},
            "source": UNCONFIRMED_SOURCE,
            "date": today,
        }
        for off in unreadable.values()
    ]


def describe(
    area: Area, lang: str, scored: Sequence[Mapping[str, Any]], spot: bool = False
) -> dict[str, Any]:
    """Write a report's levels, score and narrative in lang from its language-free figures.

    spot: a point report headed by what lies at the spot (its layers say so in at_point);
    reports stored before spots had headlines keep the circle's, in either language. An
    address placed only at its 町丁目 (chome_only) is headed by its circle: the pixel under
    the town's representative point is not the address's, and the circle (up to 4 km)
    may hold worse.

    Only the stored index and numbers of each layer are read, so a stored report can be
    written again in the other language without fetching anything (see translate).
    """
    if lang not in LABELS:
        raise ValueError(f"lang must be one of {LANGS}, not {lang!r}")
    spot = spot and not chome_only(area)
    by_key = {row["key"]: row for row in scored}
    layers = []
    for layer in LAYERS:
        row = by_key.get(layer.key)
        if row is None:  # a report stored before this layer was read: it has no such row
            continue
        state = state_of(row)
        level = level_of(row["index"]) if state in (ZONES, READ) else None
        label = LABELS[lang][level - 1] if level else STATE_LABELS[state][lang == "ja"]
        if state == SHOWN:
            names = {c["key"]: c[lang] for c in row.get("legend", ())}
            said = SHOWN_LABELS.get(layer.key, SHOWN_LABEL)[lang]
            label = said.format(names.get(row.get("worst"), row.get("worst")))
        if level and level < 5 and row.get("stray"):  # a known level, the least it can be
            label += AT_LEAST[lang]
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
                "label": label,
                "state": state,
                "index": row["index"] if level else None,
                "numbers": dict(row["numbers"]),
                **{k: row[k] for k in DETAILS if k in row},
                **({"at_point": worded(row["at_point"])} if "at_point" in row else {}),
            }
        )
    # Only layers with a level count: a zone layer with no zone found, not published or
    # not read has none, and is never "very low"; nor has liquefaction over water alone
    # (the shaking layer always has one, so the headline always has a layer).
    read = [row for row in layers if row["level"]]
    head = headline(read, WEIGHTS)
    score_label = LABELS[lang][head.level - 1]
    # A point's report is headed by the spot itself: each layer's class under the point,
    # leveled by the layer's own rule; the circle's headline is kept beside it.
    at_spot = [
        {**row, "level": level, "index": index_of(level), "label": LABELS[lang][level - 1]}
        for row in (layers if spot else ())
        if (level := spot_level(row))
    ]
    circle = None
    if at_spot:
        circle = {
            "level": head.level,
            "score": head.score,
            "score_label": score_label,
            "worst": list(head.worst),
            "radius_m": round(area.radius_m),
        }
        head = headline(at_spot, WEIGHTS)
        score_label = LABELS[lang][head.level - 1]
        text = narrative(area, lang, head.score, score_label, at_spot, (circle, read))
    else:
        text = narrative(area, lang, head.score, score_label, read)
    return {
        "layers": layers,
        "score": head.score,
        "score_label": score_label,
        "level": head.level,
        "band": list(band(head.level)),
        "worst": list(head.worst),
        "least": list(head.least),
        **({"circle": circle} if circle else {}),
        "narrative": text + no_zone_sentence(lang, layers) + uncertain_sentence(lang, layers),
        # What to do at the spot, by the published rules (actions.py); none with no spot.
        "todo": todo(layers, lang),
        # Whether any zone layer (flood, tsunami, storm surge, inland flooding, house
        # collapse, landslide) found a designated zone; flood duration is a detail of flood.
        "zones_found": any(
            row["level"] or row["state"] == UNCERTAIN for row in layers if row["key"] in ZONE_LAYERS
        ),
    }


def chome_only(area: Area) -> bool:
    """Tell whether an address is placed only at its 町丁目's representative point."""
    return bool(area.radius_m) and (area.address or {}).get("precision") == "chome"


WEIGHTS = {layer.key: layer.weight for layer in LAYERS}
ZONE_LAYERS = ("flood", "tsunami", "storm_surge", "inland_flood", "house_collapse", "landslide")
# Zones shown, never weighed: their classes set no level.
DETAIL_LAYERS = ("flood_planned", "flood_duration")


def state_of(row: Mapping[str, Any]) -> str:
    """Return a stored layer row's state (reports stored before states: from its fields)."""
    if row.get("state"):
        return str(row["state"])
    if row.get("omitted"):
        return OMITTED
    if row["key"] in DETAIL_LAYERS:
        return SHOWN if row.get("worst") else NO_ZONE
    if row["key"] not in ZONE_LAYERS:
        return READ
    # Before states, a zone layer with no zone found was stored at level 1 with no worst
    # class: that is "no zone", never "very low". (A row without "worst" at all is not
    # such a stored row: its index alone says its level.)
    return NO_ZONE if "worst" in row and row["worst"] is None else ZONES


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
    spot = "circle" in report  # headed by its spot when it was made
    return {**report, "lang": lang, **describe(area, lang, report["layers"], spot)}


def headline_of(report: Mapping[str, Any]) -> Headline:
    """Return the headline a stored report's page shows: its spot's, for a point's report."""
    area = Area.from_dict(report["area"])
    head = describe(area, "en", report["layers"], "circle" in report)
    worst, least = tuple(head["worst"]), tuple(head["least"])
    return Headline(head["level"], head["score"], worst, least, at_spot="circle" in head)


NO_ZONE_FOUND = {
    "en": (
        " No designated zone ({names}) was found in the sources read;"
        " that does not mean safe: the data may not be prepared there."
    ),
    "ja": (
        "読み取ったデータには指定区域（{names}）は見つかりませんでした"
        "（安全とは限りません。データが未整備の場合があります）。"
    ),
}


def no_zone_sentence(lang: str, layers: Sequence[Mapping[str, Any]]) -> str:
    """Say so when no zone layer has a level: never let that read as "very low".

    The zone layers the report has are named (a report stored before storm surge and
    inland flooding were read names the three it read).
    """
    zone_rows = [row for row in layers if row["key"] in ZONE_LAYERS]
    if any(row["level"] or row["state"] == UNCERTAIN for row in zone_rows):
        return ""
    names = [row["name"] if lang == "ja" else row["name"].lower() for row in zone_rows]
    said = (
        "・".join(names)
        if lang == "ja"
        else " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    )
    return NO_ZONE_FOUND[lang].format(names=said)


def uncertain_sentence(lang: str, layers: Sequence[Mapping[str, Any]]) -> str:
    """Name the layers whose level is uncertain: left out of the score, never read lower;
    and those whose known level is the least they can be (stray colours beside it)."""
    # A detail shown and never weighed (flood duration) cannot raise the score: not said here.
    keys = [
        row["key"]
        for row in layers
        if row["state"] == UNCERTAIN and row["key"] not in DETAIL_LAYERS
    ]
    floors = [row["key"] for row in layers if row["state"] == ZONES and row.get("stray")]
    said = ""
    if keys:
        names = names_of(layers, keys, lang)
        if lang == "ja":
            said += (
                f"{names}は凡例にない色があるためレベルを判定できず、総合スコアに含めていません"
                "（実際はより高い可能性があります）。"
            )
        else:
            said += (
                f" The level of {names} could not be determined: its tiles hold colours not"
                " in the legend, which could be a worse class; the overall score leaves it"
                " out and could be higher."
            )
    if floors:
        names = names_of(layers, floors, lang)
        if lang == "ja":
            said += f"{names}には凡例にない色もあり、実際は表示のレベルより高い可能性があります。"
        else:
            said += (
                f" {names} also shows colours not in the legend: its level is the least it"
                " can be, and could be higher."
            )
    return said


def spot_level(row: Mapping[str, Any]) -> int | None:
    """Return a layer's level at a point report's spot, by the layer's own rule (None: none).

    A zone class is its level; liquefaction and shaking read the spot's mesh as if it were
    the whole area (a high tendency alone is level 5, moderate 3, low 2, very low 1).
    No zone, a colour not in the legend, water or no data: no level at the spot.
    """
    at = row.get("at_point")
    if not at or state_of(row) not in (ZONES, NO_ZONE, READ, UNCERTAIN):
        return None
    key = at["key"]
    if row["key"] == "liquefaction":
        return {"very_low": 1, "low": 2, "moderate": 3, "high": 5}.get(key)
    if row["key"] == "seismic":
        return next((i for i, b in enumerate(SHAKING_BANDS, 1) if b[0] == key), None)
    return next((c.get("level") for c in row.get("legend", ()) if c["key"] == key), None)


def circle_sentence(
    lang: str, circle: Mapping[str, Any], layers: Sequence[Mapping[str, Any]]
) -> str:
    """Say what the circle around the spot holds at its worst, beside the spot's headline."""
    worst, level = names_of(layers, circle["worst"], lang), circle["level"]
    label, radius, score = circle["score_label"], circle["radius_m"], circle["score"]
    if lang == "ja":
        return (
            f"半径{radius}mの円内で最も厳しいのは{worst}（レベル{level}：{label}）で、"
            f"円全体の総合スコアは{score}点です。"
        )
    return (
        f"Within the {radius} m circle the worst is {worst} (level {level},"
        f" {label.lower()}); the circle's overall score is {score}. "
    )


def narrative(
    area: Area,
    lang: str,
    score: int,
    score_label: str,
    layers: Sequence[Mapping[str, Any]],
    around: tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]] | None = None,
) -> str:
    """Return two to four plain sentences about the score and the extreme layers.

    Layers tied at the worst (or the mildest) level are named together, in report order.
    With around (the circle's headline and its layers), the layers are those read at a
    point report's spot: the sentences speak of the spot, then of the circle around it.
    """
    head = headline(layers, WEIGHTS)
    top = next(row for row in layers if row["key"] == head.worst[0])
    low = next(row for row in layers if row["key"] == head.least[0])
    worst, least = names_of(layers, head.worst, lang), names_of(layers, head.least, lang)
    several = len(head.worst) > 1
    circle = circle_sentence(lang, *around) if around else ""
    advice = max(top["level"], around[0]["level"] if around else 0) >= 4
    if lang == "ja":
        both = "いずれも" if several else ""
        place = f"{area.prefecture_ja}{area.name_ja}"
        if chome_only(area):
            matched = (area.address or {}).get("matched") or place
            place = (
                f"{matched}（町丁目の代表点。番地の位置ではありません）から"
                f"半径{round(area.radius_m)}mの範囲"
            )
        if around:
            place = f"この地点（{(area.address or {}).get('matched') or place}付近）"
        spot = "この地点の" if around else ""
        scored = f"{spot}総合ハザードスコアは100点中{score}点（{score_label}）です。"
        if top["level"] == low["level"]:
            text = (
                f"{place}では、レベルのある項目がすべて同じ"
                f"レベル{top['level']}（{top['label']}）です。{scored}"
            )
        else:
            text = (
                f"{place}で最も注意が必要なのは{worst}"
                f"（{both}レベル{top['level']}：{top['label']}）です。{scored}"
            )
            both = "いずれも" if len(head.least) > 1 else ""
            text += f"最も低いのは{least}（{both}レベル{low['level']}：{low['label']}）です。"
        text += circle
        if advice:
            return text + "お住まいの市区町村の公式ハザードマップと避難計画も確認してください。"
        return text + "高いレベルの項目はありません。"
    concern = "the greatest concerns are" if several else "the greatest concern is"
    each = "each " if several else ""
    place = f"In {area.name_romaji}, {area.prefecture_romaji}"
    if chome_only(area):
        matched = (area.address or {}).get("matched", "")
        street = matched.removeprefix(area.prefecture_ja + area.name_ja)
        place = (
            f"Within {round(area.radius_m)} m of the representative point of the 町丁目"
            f" {street_en(area.code5, street)}, {area.name_romaji}, {area.prefecture_romaji},"
        )
    if around:
        place = f"At the spot near {area.name_romaji}, {area.prefecture_romaji},"
    spot = "The spot's overall" if around else "The overall"
    scored = f"{spot} hazard score is {score} out of 100 ({score_label.lower()}). "
    if top["level"] == low["level"]:
        text = (
            f"{place} every layer with a level is at the same level, "
            f"{top['level']} ({top['label'].lower()}). {scored}"
        )
    else:
        text = (
            f"{place} {concern} {worst} "
            f"({each}level {top['level']}, {top['label'].lower()}). {scored}"
        )
        are, each = ("are", "each ") if len(head.least) > 1 else ("is", "")
        text += f"The least {are} {least} ({each}level {low['level']}, {low['label'].lower()}). "
    text += circle
    if advice:
        return text + "Check the municipality's official hazard map and evacuation plan."
    return text + "No layer reaches a high level."
