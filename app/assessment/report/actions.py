"""What to do at a point report's spot, by the published rules, from what lies there.

The rules (docs/providers.md, "What to do", cites each):
- the Cabinet Office and Fire and Disaster Management Agency's evacuation flow (避難行動判定フロー,
  2020): a spot in a coloured zone leaves for a safe place outside it (立退き避難); in an
  inundation zone one may stay at home only when all three hold: outside a house-collapse
  zone, rooms higher than the water, and able to last until the water goes down (food,
  water); a spot in no coloured zone still follows the municipality's evacuation calls
  where the land is lower than around it or near a slope;
- how deep water reaches a house's floors (the depth legend as prefectures publish it
  beside the flow: under 0.5 m below the ground floor's floor, 0.5-3 m the ground floor,
  3-5 m the second floor, 5 m or more the third floor and up);
- the Japan Meteorological Agency's action on a tsunami warning: leave at once for high
  ground or a tsunami evacuation building, and on strong or long shaking do not wait.
Shaking and liquefaction have no published rule per class at a spot: nothing is said of them
beyond that. Everything here is worded from a report's stored rows (at_point), so a report
stored before this was written has it too; a report with no spot (a municipality's, or one
headed by its circle) has none.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from ..grid.tiles import NO_ZONE

WATER = ("flood", "storm_surge", "inland_flood")  # water over the land, the flow's inundation
SEEN = WATER + ("tsunami", "landslide", "house_collapse")  # the zone layers the flow reads
UNREAD = ("not_published", "omitted", "uncertain")

# The floor the water reaches, by depth class (the four steps of the depth legends).
FLOOR_OF = {
    "lt0.3": 0, "0.3-0.5": 0, "lt0.5": 0, "0.5-1": 1, "1-3": 1, "0.5-3": 1,
    "3-5": 2, "5-10": 3, "10-20": 3, "ge20": 3,
}  # fmt: skip
FLOORS = (
    ("stays below the ground floor's floor", "1階の床下までの浸水"),
    ("reaches the ground floor's rooms", "1階の床上から軒下までの浸水"),
    ("reaches the second floor's rooms", "2階の床上から軒下までの浸水"),
    ("reaches the third floor and above", "3階の床上以上の浸水"),
)
WORDS = {
    "house_collapse": (
        "The spot lies in a house-collapse zone ({what}): in a flood the house itself can be"
        " brought down or washed away, so staying at home is not one of the choices. Leave"
        " early for a safe place outside the zone (早期の立退き避難).",
        "この地点は家屋倒壊等氾濫想定区域（{what}）にあります。洪水のときは家屋が倒壊・流失する"
        "おそれがあるため、自宅に留まることはできません。早期に区域の外の安全な場所へ立退き避難"
        "してください。",
    ),
    "water": (
        "Water expected at the spot: {what}; it {floor}. The rule is to leave for a safe"
        " place outside the zone when flooding threatens.",
        "この地点で想定される浸水：{what}（{floor}）。浸水のおそれがあるときは、原則と"
        "して区域の外の安全な場所へ立退き避難してください。",
    ),
    "stay": (
        "You may instead stay at home, on a floor above the water, only if all three hold:"
        " (1) outside a house-collapse zone ({collapse}); (2) your rooms higher than the water"
        " (the water {floor}); (3) you can last until the water goes down, with food and water"
        " enough ({duration}).",
        "次の3つがすべて当てはまる場合に限り、自宅の浸水しない階に留まって安全を確保することも"
        "できます：①家屋倒壊等氾濫想定区域に入っていない（{collapse}）②居室が浸水深より高い"
        "（{floor}）③水がひくまで我慢でき、水・食糧などの備えが十分"
        "（{duration}）。",
    ),
    "tsunami": (
        "The spot lies in a tsunami inundation zone ({what}). On strong shaking, on long slow"
        " shaking, or on a tsunami warning, leave at once for high ground or a tsunami"
        " evacuation building: do not wait to see the sea.",
        "この地点は津波浸水想定区域（{what}）にあります。強い揺れや長くゆっくりした揺れを感じたら、"
        "または津波警報が出たら、ただちに高台や津波避難ビルなど安全な場所へ避難してください。",
    ),
    "landslide": (
        "The spot lies in a sediment-disaster zone ({what}). When the municipality calls for"
        " evacuation, the rule is to leave the zone for a safe place outside it.",
        "この地点は土砂災害の区域（{what}）にあります。市町村から避難の呼びかけがあったときは、"
        "原則として区域の外の安全な場所へ立退き避難してください。",
    ),
    "landslide_border": (
        "The spot lies on the dashed edge of a planned sediment-disaster zone ({what}): it"
        " may lie inside it. Take it as in the zone: when the municipality calls for"
        " evacuation, leave for a safe place outside it.",
        "この地点は土砂災害の指定予定区域の境界線上（{what}）にあり、区域内の可能性があります。"
        "区域内として、市町村から避難の呼びかけがあったときは区域の外の安全な場所へ立退き避難して"
        "ください。",
    ),
    "no_zone": (
        "The maps read colour no zone at the spot ({what}). Even so, where the land is lower"
        " than around it or close to a slope or cliff, follow the municipality's evacuation"
        " calls.",
        "読み取った地図では、この地点はいずれの区域（{what}）にも入っていません。それでも、周りより"
        "低い土地や崖のそばでは、市町村からの避難情報に従って必要に応じて避難してください。",
    ),
    "unknown": (
        "Not known at the spot: {what} (not published here, not read, or uncertain). Check"
        " the municipality's own hazard map for these.",
        "この地点で判定できない項目：{what}（公開データがない、読み取っていない、または判定でき"
        "ない）。市町村のハザードマップで確認してください。",
    ),
    "no_rule": (
        "For earthquake shaking and liquefaction the rules above set no action by class:"
        " none is given here.",
        "地震の揺れと液状化については、上の指針に地点の区分ごとの行動は定められていないため、"
        "ここでは示しません。",
    ),
}
COLLAPSE = {
    "outside": ("the spot is outside one", "この地点は区域外です"),
    "unknown": ("not known at the spot", "この地点では判定できません"),
    "not_read": ("not read by this report", "この報告書では読み取っていません"),
}
NO_DURATION = (
    "how long the water stays is not known here: ask the municipality",
    "水がひくまでの時間はこの報告書では分かりません。市町村に確認してください",
)


def _said(row: Mapping[str, Any], lang: str) -> str:
    return row["at_point"]["ja" if lang == "ja" else "en"]


def _at(row: Mapping[str, Any] | None) -> str | None:
    """Return the class under the spot of a layer read there, or None when not known there."""
    if row is None or "at_point" not in row or row.get("state") in UNREAD:
        return None
    key = row["at_point"]["key"]
    return None if key in ("other", "not_mapped") else key


def todo(layers: Sequence[Mapping[str, Any]], lang: str) -> list[dict[str, str]]:
    """Return what to do at the spot, each step with the rule it follows; [] with no spot.

    layers are a described report's rows (analysis.describe): each a key, a name, a state
    and, for a point's report, at_point.
    """
    by_key = {row["key"]: row for row in layers}
    if not any("at_point" in row for row in layers):
        return []
    ja = lang == "ja"
    name = lambda key: by_key[key]["name"] if ja else by_key[key]["name"].lower()  # noqa: E731
    joined = "・".join if ja else ", ".join
    steps = []

    def step(rule: str, **words: str) -> None:
        steps.append({"rule": rule, "text": WORDS[rule][ja].format(**words)})

    collapse = _at(by_key.get("house_collapse"))
    tsunami, slope = _at(by_key.get("tsunami")), _at(by_key.get("landslide"))
    # Staying is the flow's exception for inundation alone: a house-collapse, tsunami or
    # sediment-disaster zone at the spot leaves no choice but to leave.
    must_leave = any(at not in (None, NO_ZONE) for at in (collapse, tsunami, slope))
    if collapse not in (None, NO_ZONE):
        step("house_collapse", what=_said(by_key["house_collapse"], lang))
    wet = [k for k in WATER if _at(by_key.get(k)) in FLOOR_OF]
    if wet:
        floor = FLOORS[max(FLOOR_OF[_at(by_key[k])] for k in wet)][ja]
        what = joined(f"{name(k)}{'：' if ja else ' '}{_said(by_key[k], lang)}" for k in wet)
        step("water", what=what, floor=floor)
        if not must_leave:
            if "house_collapse" not in by_key:
                state = "not_read"
            else:
                state = "outside" if collapse == NO_ZONE else "unknown"
            duration = _at(by_key.get("flood_duration"))
            if duration not in (None, NO_ZONE) and "flood" in wet:
                lasts = ("how long the water stays: " if not ja else "浸水継続時間：") + _said(
                    by_key["flood_duration"], lang
                )
            else:
                lasts = NO_DURATION[ja]
            steps.append(
                {
                    "rule": "stay",
                    "text": WORDS["stay"][ja].format(
                        collapse=COLLAPSE[state][ja], floor=floor, duration=lasts
                    ),
                }
            )
    if tsunami not in (None, NO_ZONE):
        step("tsunami", what=_said(by_key["tsunami"], lang))
    if slope not in (None, NO_ZONE):
        # On a planned zone's dashed border the spot may lie inside it: said so.
        border = slope.endswith("_border")
        step("landslide_border" if border else "landslide", what=_said(by_key["landslide"], lang))
    seen = [k for k in SEEN if k in by_key]
    unknown = [k for k in seen if _at(by_key[k]) is None]
    clear = [k for k in seen if _at(by_key[k]) == NO_ZONE]
    if not steps and clear:
        step("no_zone", what=joined(name(k) for k in clear))
    if unknown:
        step("unknown", what=joined(name(k) for k in unknown))
    if {"seismic", "liquefaction"} & by_key.keys():
        step("no_rule")
    return steps
