"""The hazard layers, and from what they read to levels, an overall score and words.

Flood (at the planned maximum and, shown only, the planned scale), tsunami, storm surge,
inland flooding, house collapse, flood duration and landslide read the designated zones of
the hazard map portal over the place's outline (shares of the area per legend class);
liquefaction the landform class of the 250 m meshes inside it;
seismic J-SHIS's 30-year probability of strong shaking there (LAYERS).
Each layer's row, with its level from 1 (very low) to 5 (very high), is read from those
shares by the rules in readings.py; its index is the middle of that level's fifth of 0 to
1; its state is one of states.py's. describe() words the rows in a language: each layer's
label, the headline (the overall level is the worst layer's, and the score, 0 to 100, lies
in that level's band: headline.py, so score, label and worst layer agree by construction)
and the narrative (narrative.py). Everything here is deterministic, so the same inputs
always give the same report.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..place.area import Area
from .actions import todo
from .headline import Headline, band, headline
from .narrative import chome_only, narrative, no_zone_sentence, uncertain_sentence
from .readings import (
    SHAKING_BANDS,
    TENDENCIES,
    index_of,
    read_liquefaction,
    read_seismic,
    read_zones,
)
from .states import (
    NO_DATA,
    NO_ZONE,
    NOT_PUBLISHED,
    OMITTED,
    READ,
    SHOWN,
    UNCERTAIN,
    ZONE_LAYERS,
    ZONES,
    state_of,
)

LABELS = {
    "en": ("Very low", "Low", "Moderate", "High", "Very high"),
    "ja": ("非常に低い", "低い", "中程度", "高い", "非常に高い"),
}
LANGS = tuple(LABELS)

Numbers = dict[str, float]

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
    Layer("flood", "Flood", "洪水", ("flood_zones",), read_zones, 0.25),
    # The planned scale (計画規模): a flood of about once in 10 to 100 years, smaller and
    # more frequent than the planned maximum flood weighs; its classes set no level, so it
    # is shown as a detail of flood, never weighed (docs/providers.md, "The headline").
    Layer(
        "flood_planned",
        "Flood (planned scale)",
        "洪水（計画規模）",
        ("flood_planned_zones",),
        read_zones,
        0,
    ),
    Layer("tsunami", "Tsunami", "津波", ("tsunami_zones",), read_zones, 0.15),
    # Storm surge and inland flooding are water over the land on the same depth scale and
    # level rule as flood, and weigh as flood does (docs/providers.md, "The headline").
    Layer("storm_surge", "Storm surge", "高潮", ("storm_surge_zones",), read_zones, 0.25),
    Layer("inland_flood", "Inland flooding", "内水氾濫", ("inland_flood_zones",), read_zones, 0.25),
    # House collapse: two datasets (the flow of flood water, an eroding bank), one question a
    # buyer asks (can the house itself be brought down?) and one answer (leave early); a
    # zone is level 5 and weighs as flood does. Flood duration is a detail of flood: its
    # classes set no level, so it is shown and never weighed (docs/providers.md).
    Layer(
        "house_collapse",
        "House-collapse zone",
        "家屋倒壊等氾濫想定区域",
        ("house_collapse_flow_zones", "house_collapse_bank_zones"),
        read_zones,
        0.25,
    ),
    Layer(
        "flood_duration", "Flood duration", "浸水継続時間", ("flood_duration_zones",), read_zones, 0
    ),
    Layer("liquefaction", "Liquefaction", "液状化", ("ground",), read_liquefaction, 0.15),
    Layer(
        "landslide",
        "Landslide",
        "土砂災害",
        ("debris_flow_zones", "steep_slope_zones", "landslide_zones"),
        read_zones,
        0.15,
    ),
    Layer("seismic", "Earthquake shaking", "地震の揺れ", ("faults",), read_seismic, 0.30),
)
# What a layer's row carries besides its index and numbers (describe passes them on).
DETAILS = (
    "shares", "worst", "mapped", "maps", "landforms", "omitted", "legend", "mesh_classes",
    "state", "reason", "reason_ja", "notes", "stray", "unreadable",
)  # fmt: skip


def legend_of(key: str) -> list[dict[str, Any]]:
    """Return a layer's classes in order: key, colour, names, and the dataset they are of."""
    from ..grid.legends import LEGENDS
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
    from ..grid.legends import LEGENDS

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
    from ..grid.legends import UNCONFIRMED_SOURCE

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
        text = narrative(area, lang, head, score_label, at_spot, (circle, read))
    else:
        text = narrative(area, lang, head, score_label, read)
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


WEIGHTS = {layer.key: layer.weight for layer in LAYERS}


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
