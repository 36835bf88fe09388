"""The report's headline: score, label and worst layer agree for every mix of layers."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.assessment.place.area import Area
from app.assessment.place.gazetteer import gazetteer
from app.assessment.report import analysis

INDEX = st.floats(min_value=0, max_value=1, allow_nan=False)
LAYER_INDEXES = st.lists(INDEX, min_size=len(analysis.LAYERS), max_size=len(analysis.LAYERS))
BANDS = {1: (0, 19), 2: (20, 39), 3: (40, 59), 4: (60, 79), 5: (80, 100)}


def scored(indexes):
    return [
        {"key": layer.key, "index": round(i, 3), "numbers": {}}
        for layer, i in zip(analysis.LAYERS, indexes, strict=True)
    ]


def area() -> Area:
    return next(a for a in gazetteer().areas if a.code == "131016")  # 千代田区


@settings(deadline=None)
@given(LAYER_INDEXES, st.sampled_from(analysis.LANGS))
def test_the_score_its_label_and_the_worst_layer_agree(indexes, lang):
    report = analysis.describe(area(), lang, scored(indexes))
    # Flood duration has no level: a detail of flood, shown, never weighed.
    leveled = [row for row in report["layers"] if row["level"]]
    worst = max(row["level"] for row in leveled)
    low, high = BANDS[worst]
    assert low <= report["score"] <= high, (report["score"], worst)
    assert report["score_label"] == analysis.LABELS[lang][worst - 1]
    # Every layer at the worst level is named, and only those.
    assert report["worst"] == [row["key"] for row in report["layers"] if row["level"] == worst]
    first = report["narrative"].split("。")[0].split(". ")[0]
    for row in report["layers"]:
        # A name as a whole name: "flood" is not named by "inland flooding".
        named = re.escape(row["name"] if lang == "ja" else row["name"].lower())
        said = re.search(named if lang == "ja" else rf"\b{named}\b", first) is not None
        at_worst = row["level"] == worst
        if len(report["worst"]) < len(leveled):
            assert said == at_worst, (first, row["key"])


@settings(deadline=None)
@given(LAYER_INDEXES, st.lists(st.booleans(), min_size=len(analysis.LAYERS),
                               max_size=len(analysis.LAYERS)))  # fmt: skip
def test_the_score_is_the_weighted_mean_of_the_layers_with_a_level(indexes, leveled):
    # Weights are relative: the mean divides by the weights of the layers that have a
    # level, so a layer with none (no zone found) changes no other layer's share.
    rows = scored(indexes)
    for row, has_level in zip(rows, leveled, strict=True):
        if not has_level and row["key"] in analysis.ZONE_LAYERS:
            row.update({"state": analysis.NO_ZONE, "worst": None})
    report = analysis.describe(area(), "en", rows)
    weights = {layer.key: layer.weight for layer in analysis.LAYERS}
    counted = [r for r in report["layers"] if r["level"]]
    total = sum(weights[r["key"]] for r in counted)
    mean = round(100 * sum(weights[r["key"]] * r["index"] for r in counted) / total)
    low, high = BANDS[report["level"]]
    assert report["score"] == min(high, max(low, mean))


def test_storm_surge_and_inland_flooding_weigh_as_flood_does():
    weights = analysis.WEIGHTS
    assert weights["storm_surge"] == weights["inland_flood"] == weights["flood"]
    # And they follow the one level rule: either alone at level 5 heads the report.
    for key in ("storm_surge", "inland_flood"):
        rows = [{"key": layer.key, "index": 0.9 if layer.key == key else 0.1, "numbers": {}}
                for layer in analysis.LAYERS]  # fmt: skip
        report = analysis.describe(area(), "en", rows)
        assert report["level"] == 5 and report["worst"] == [key]


def test_a_place_where_the_new_layers_found_no_zone_scores_as_the_five_layers_did():
    # The five layers of a stored report, and the same with storm surge and inland flooding
    # read and finding no zone: the headline does not move.
    by_key = {"flood": 0.5, "tsunami": 0.1, "liquefaction": 0.3, "landslide": 0.7, "seismic": 0.5}
    five = [{"key": k, "index": v, "numbers": {}} for k, v in by_key.items()]
    none = {"index": None, "numbers": {}, "state": analysis.NO_ZONE, "worst": None}
    seven = five + [{"key": "storm_surge", **none}, {"key": "inland_flood", **none}]
    old, new = (analysis.describe(area(), "en", rows) for rows in (five, seven))
    assert (new["level"], new["score"], new["worst"]) == (old["level"], old["score"], old["worst"])
    assert [row["key"] for row in old["layers"]] == list(by_key)  # the stored report's own


def test_a_tie_for_the_greatest_hazard_names_each_layer():
    # Chiyoda as a user saw it: flood, landslide and shaking all at level 3.
    by_key = {"flood": 0.45, "tsunami": 0.1, "liquefaction": 0.3, "landslide": 0.5, "seismic": 0.41}
    rows = [{"key": k, "index": v, "numbers": {}} for k, v in by_key.items()]
    en = analysis.describe(area(), "en", rows)
    assert en["worst"] == ["flood", "landslide", "seismic"]
    assert (
        "the greatest concerns are flood, landslide and earthquake shaking (each level 3"
        in (en["narrative"])
    )
    ja = analysis.describe(area(), "ja", rows)
    assert (
        "最も注意が必要なのは洪水・土砂災害・地震の揺れ（いずれもレベル3：中程度）"
        in (ja["narrative"])
    )
    assert "最も低いのは津波（レベル1：非常に低い）" in ja["narrative"]


def test_a_report_with_every_layer_alike_says_so_once():
    rows = [{"key": layer.key, "index": 0.3, "numbers": {}} for layer in analysis.LAYERS]
    ja = analysis.describe(area(), "ja", rows)
    assert ja["narrative"].startswith(
        "東京都千代田区では、レベルのある項目がすべて同じレベル2（低い）です。"
    )
    assert ja["narrative"].count("レベル2") == 1


# Rows as stored before layers had a state: a zone layer with no zone found was index 0.1
# (level 1) with no worst class; one with zones named its worst class.
@pytest.mark.parametrize(
    ("row", "state"),
    [
        ({"key": "flood", "index": 0.1, "worst": None}, analysis.NO_ZONE),
        ({"key": "landslide", "index": 0.1, "worst": None}, analysis.NO_ZONE),
        ({"key": "flood", "index": 0.5, "worst": "0.5-3"}, analysis.ZONES),
        ({"key": "tsunami", "index": 0.1, "worst": None, "omitted": "terms"}, analysis.OMITTED),
        ({"key": "liquefaction", "index": 0.1, "worst": None}, analysis.READ),
        ({"key": "flood", "index": 0.1, "worst": None, "state": "zones"}, analysis.ZONES),
    ],
)
def test_a_stored_row_s_state_follows_from_its_fields(row, state):
    assert analysis.state_of(row) == state


def test_a_report_stored_before_states_never_reads_no_zone_as_very_low():
    by_key = {"flood": (0.1, None), "tsunami": (0.1, None), "landslide": (0.1, None),
              "liquefaction": (0.3, "low"), "seismic": (0.5, "6-26")}  # fmt: skip
    rows = [{"key": k, "index": i, "worst": w, "numbers": {}} for k, (i, w) in by_key.items()]
    ja = analysis.describe(area(), "ja", rows)
    flood = ja["layers"][0]
    assert flood["level"] is None and flood["label"] != "非常に低い"
    assert flood["state"] == analysis.NO_ZONE
    assert "非常に低い" not in ja["narrative"] and ja["least"] == ["liquefaction"]


def test_a_house_collapse_zone_weighs_as_flood_does_and_alone_heads_the_report():
    assert analysis.WEIGHTS["house_collapse"] == analysis.WEIGHTS["flood"]
    rows = [{"key": layer.key, "index": 0.1, "numbers": {}} for layer in analysis.LAYERS]
    collapse = next(row for row in rows if row["key"] == "house_collapse")
    collapse["index"] = 0.9  # a zone: level 5, 「早期に立ち退き避難を」
    report = analysis.describe(area(), "en", rows)
    assert report["level"] == 5 and report["worst"] == ["house_collapse"]


def test_flood_duration_is_shown_and_never_moves_the_headline():
    # The longest duration found (four weeks or more) is said, with no level of its own.
    by_key = {"flood": 0.5, "tsunami": 0.1, "liquefaction": 0.3, "landslide": 0.7, "seismic": 0.5}
    rows = [{"key": k, "index": v, "numbers": {}} for k, v in by_key.items()]
    legend = analysis.legend_of("flood_duration")
    shown = {"key": "flood_duration", "index": None, "numbers": {}, "state": analysis.SHOWN,
             "worst": "ge4w", "legend": legend}  # fmt: skip
    old, new = (analysis.describe(area(), lang, rows + extra) for lang, extra in
                (("en", []), ("en", [shown])))  # fmt: skip
    assert (new["level"], new["score"], new["worst"]) == (old["level"], old["score"], old["worst"])
    row = next(row for row in new["layers"] if row["key"] == "flood_duration")
    assert row["level"] is None and row["state"] == analysis.SHOWN
    assert "4 weeks or more" in row["label"] and "not weighed" in row["label"]
    ja = analysis.describe(area(), "ja", rows + [shown])
    assert "4週間以上" in next(r for r in ja["layers"] if r["key"] == "flood_duration")["label"]


def test_a_report_stored_before_house_collapse_and_duration_is_described_without_them():
    # Stored before the planned scale was read too: it had seven layers.
    seven = [{"key": layer.key, "index": 0.3, "numbers": {}} for layer in analysis.LAYERS
             if layer.key not in ("house_collapse", "flood_duration", "flood_planned")]  # fmt: skip
    report = analysis.describe(area(), "en", seven)
    keys = [row["key"] for row in report["layers"]]
    assert "house_collapse" not in keys and "flood_duration" not in keys and len(keys) == 7


def test_the_planned_scale_is_shown_and_never_moves_the_headline():
    # A flood of about once in 10 to 100 years, smaller than the planned maximum weighed as
    # flood: its deepest class is said, with no level, weight 0, at the spot too.
    assert analysis.WEIGHTS["flood_planned"] == 0
    by_key = {"flood": 0.5, "tsunami": 0.1, "liquefaction": 0.3, "landslide": 0.3, "seismic": 0.3}
    rows = [{"key": k, "index": v, "numbers": {}} for k, v in by_key.items()]
    legend = analysis.legend_of("flood_planned")
    assert {c["level"] for c in legend} == {0}
    shown = {"key": "flood_planned", "index": None, "numbers": {}, "state": analysis.SHOWN,
             "worst": "5-10", "legend": legend,
             "at_point": {"key": "5-10", "en": "5 to 10 m", "ja": "5m以上10m未満"}}  # fmt: skip
    old, new = (analysis.describe(area(), "en", rows + extra) for extra in ([], [shown]))
    assert (new["level"], new["score"], new["worst"]) == (old["level"], old["score"], old["worst"])
    assert new["level"] == 3  # flood's 0.5 m to 3 m, not the planned scale's 5 to 10 m
    row = next(row for row in new["layers"] if row["key"] == "flood_planned")
    assert row["level"] is None and row["state"] == analysis.SHOWN
    assert row["label"] == "Deepest: 5 to 10 m (a detail of flood: shown, not weighed)"
    assert analysis.spot_level(row) is None  # a point's headline never weighs it either
    assert "planned scale" not in new["narrative"].lower()
    ja = analysis.describe(area(), "ja", rows + [shown])
    said = next(r for r in ja["layers"] if r["key"] == "flood_planned")["label"]
    assert said.startswith("最も深い区分：5m以上10m未満")
    # A report stored before the planned scale was read is described without it, never
    # "no zone"; a stored row without a state is shown by its deepest class.
    assert "flood_planned" not in [r["key"] for r in old["layers"]]
    stateless = {k: v for k, v in shown.items() if k != "state"}
    assert analysis.state_of(stateless) == analysis.SHOWN
