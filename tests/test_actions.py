"""What to do at a point report's spot: each published rule from what lies there.

Rows are built as a stored point report holds them (a class key under the spot per layer),
then described as the page describes them, so the words are the page's.
"""

import re

import pytest

from app.assessment import resolve_place
from app.assessment.report.analysis import LAYERS, describe, legend_of, translate

SPOT = (35.4540, 139.6380)  # Yokohama


def rows(at: dict[str, str], states: dict[str, str] | None = None, without=()) -> list[dict]:
    """A point report's stored rows: each layer's class under the spot (none where not given)."""
    states = states or {}
    out = []
    for layer in LAYERS:
        if layer.key in without:
            continue
        legend = legend_of(layer.key)
        key = at.get(layer.key, "none" if layer.key not in ("seismic", "liquefaction") else "")
        names = {c["key"]: (c["en"], c["ja"]) for c in legend}
        if layer.key == "seismic":
            key = "lt3"
        if layer.key == "liquefaction":
            key = "low"
        en, ja = names.get(
            key, (key, key) if key.endswith("_border") else ("No zone mapped", "区域の指定なし")
        )
        level = next((c.get("level") or c["rank"] for c in legend if c["key"] == key), None)
        out.append(
            {"key": layer.key, "numbers": {}, "legend": legend,
             "index": 0.1 + 0.2 * (level - 1) if level else 0.0,
             **({"worst": key} if level else {}),
             **({"state": states[layer.key]} if layer.key in states else {}),
             "at_point": {"key": key, "en": en, "ja": ja}}
        )  # fmt: skip
    return out


def steps(at, lang="en", **kwargs) -> dict[str, str]:
    area = resolve_place(f"{SPOT[0]}, {SPOT[1]}")
    return {s["rule"]: s["text"] for s in describe(area, lang, rows(at, **kwargs), True)["todo"]}


def test_a_house_collapse_zone_leaves_no_choice_to_stay() -> None:
    said = steps({"flood": "3-5", "house_collapse": "house_collapse_flow"})
    assert list(said) == ["house_collapse", "water", "no_rule"]
    assert "staying at home is not one of the choices" in said["house_collapse"]
    assert "reaches the second floor's rooms" in said["water"]
    japanese = steps({"flood": "3-5", "house_collapse": "house_collapse_bank"}, "ja")
    assert "早期に区域の外の安全な場所へ立退き避難" in japanese["house_collapse"]
    assert "河岸侵食" in japanese["house_collapse"] and "stay" not in japanese


@pytest.mark.parametrize(
    "depth, floor",
    [("0.3-0.5", "stays below the ground floor's floor"), ("1-3", "the ground floor's rooms"),
     ("3-5", "the second floor's rooms"), ("ge20", "the third floor and above")],
)  # fmt: skip
def test_water_at_the_spot_says_which_floor_and_the_three_conditions_to_stay(depth, floor):
    said = steps({"flood": depth, "flood_duration": "3d-1w"})
    assert list(said) == ["water", "stay", "no_rule"]
    assert floor in said["water"] and floor in said["stay"]
    assert "the spot is outside one" in said["stay"]
    assert "how long the water stays: 3 days to 1 week" in said["stay"]


def test_the_deepest_water_sets_the_floor_and_each_source_is_named() -> None:
    said = steps({"flood": "lt0.3", "storm_surge": "5-10"}, "ja")
    assert "洪水：" in said["water"] and "高潮：" in said["water"]
    assert "3階の床上以上の浸水" in said["water"]
    # Flood duration is a detail of river flood: storm surge alone says it is not known.
    surge = steps({"storm_surge": "1-3"}, "ja")
    assert "水がひくまでの時間はこの報告書では分かりません" in surge["stay"]


def test_a_house_collapse_zone_not_known_or_not_read_is_said_so_never_outside() -> None:
    unknown = steps({"flood": "1-3"}, states={"house_collapse": "not_published"})
    assert "not known at the spot" in unknown["stay"]
    assert "house-collapse zone" in unknown["unknown"]
    older = steps({"flood": "1-3"}, without=("house_collapse", "flood_duration"))
    assert "not read by this report" in older["stay"]


def test_tsunami_and_landslide_zones_say_leave() -> None:
    said = steps({"tsunami": "1-3", "landslide": "steep_slope_special"})
    assert list(said) == ["tsunami", "landslide", "no_rule"]
    assert "leave at once for high ground" in said["tsunami"]
    assert "steep slope: special warning zone" in said["landslide"]


@pytest.mark.parametrize(
    "other", [{"tsunami": "0.5-1"}, {"landslide": "debris_flow_warning"}], ids=["tsunami", "slope"]
)
def test_a_tsunami_or_slope_zone_at_the_spot_leaves_no_choice_to_stay(other) -> None:
    # Staying is the flow's exception for inundation alone: never offered beside "leave".
    said = steps({"flood": "1-3", **other})
    assert "water" in said and "stay" not in said


def test_a_spot_on_a_planned_zone_s_border_may_lie_inside_it() -> None:
    said = steps({"landslide": "steep_slope_planned_border"})
    assert list(said) == ["landslide_border", "no_rule"]
    assert "on the dashed edge of a planned sediment-disaster zone" in said["landslide_border"]
    assert "steep slope: on a planned zone's dashed border" in said["landslide_border"]
    assert "_border" not in said["landslide_border"].replace("landslide_border", "")


def test_no_zone_at_the_spot_still_says_to_follow_the_municipality_and_names_the_unknown():
    said = steps({}, states={"tsunami": "not_published"})
    assert list(said) == ["no_zone", "unknown", "no_rule"]
    assert "tsunami" not in said["no_zone"] and "tsunami" in said["unknown"]
    assert "follow the municipality's evacuation calls" in said["no_zone"]


def test_a_report_with_no_spot_says_nothing_of_what_to_do() -> None:
    area = resolve_place("東京都中央区")
    spotless = [{k: v for k, v in row.items() if k != "at_point"} for row in rows({})]
    assert describe(area, "en", spotless)["todo"] == []


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_the_page_shows_each_step_and_a_stored_report_without_them_gets_them(app, lang):
    from flask import render_template

    area = resolve_place(f"{SPOT[0]}, {SPOT[1]}")
    stored = {"area": area.to_dict(), "lang": "en", "provider": "demo",
              "generated_at": "2026-12-01T00:00:00+00:00",
              **describe(area, "en", rows({"flood": "1-3"}), spot=True)}  # fmt: skip
    stored.pop("todo")  # stored before the steps were written: they come from its rows
    report = translate(stored, lang)
    with app.test_request_context():
        html = render_template("partials/_report.html", report=report)
    block = html[html.index("data-todo") : html.index("</section>", html.index("data-todo"))]
    assert re.findall(r'data-rule="(\w+)"', block) == ["water", "stay", "no_rule"]
    assert ("この地点でとるべき行動" if lang == "ja" else "What to do at the spot") in block
    assert "避難行動判定フロー" in block
