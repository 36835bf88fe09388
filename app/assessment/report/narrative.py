"""The report's sentences: the headline's narrative, and what no zone or an uncertain
layer means, in either language, from the layers' words and levels (analysis.describe).
"""

from collections.abc import Mapping, Sequence
from typing import Any

from ..place.area import Area
from ..registers.addresses import street_en
from .headline import Headline
from .states import DETAIL_LAYERS, UNCERTAIN, ZONE_LAYERS, ZONES


def chome_only(area: Area) -> bool:
    """Tell whether an address is placed only at its 町丁目's representative point."""
    return bool(area.radius_m) and (area.address or {}).get("precision") == "chome"


def names_of(layers: Sequence[Mapping[str, Any]], keys: Sequence[str], lang: str) -> str:
    """Name the layers with these keys together, as the language lists them."""
    names = [row["name"] if lang == "ja" else row["name"].lower() for row in layers
             if row["key"] in keys]  # fmt: skip
    if lang == "ja":
        return "・".join(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


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
    head: Headline,
    score_label: str,
    layers: Sequence[Mapping[str, Any]],
    around: tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]] | None = None,
) -> str:
    """Return two to four plain sentences about the score and the extreme layers.

    head is the layers' headline (headline.headline). Layers tied at the worst (or the
    mildest) level are named together, in report order.
    With around (the circle's headline and its layers), the layers are those read at a
    point report's spot: the sentences speak of the spot, then of the circle around it.
    """
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
        scored = f"{spot}総合ハザードスコアは100点中{head.score}点（{score_label}）です。"
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
    scored = f"{spot} hazard score is {head.score} out of 100 ({score_label.lower()}). "
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
