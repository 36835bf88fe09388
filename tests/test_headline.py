"""The report's headline: score, label and worst layer agree for every mix of layers."""

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
    worst = max(row["level"] for row in report["layers"])
    low, high = BANDS[worst]
    assert low <= report["score"] <= high, (report["score"], worst)
    assert report["score_label"] == analysis.LABELS[lang][worst - 1]
    # Every layer at the worst level is named, and only those.
    assert report["worst"] == [row["key"] for row in report["layers"] if row["level"] == worst]
    first = report["narrative"].split("。")[0].split(". ")[0]
    for row in report["layers"]:
        named = row["name"] if lang == "ja" else row["name"].lower()
        at_worst = row["level"] == worst
        if len(report["worst"]) < len(report["layers"]):
            assert (named in first) == at_worst, (first, row["key"])


@settings(deadline=None)
@given(LAYER_INDEXES)
def test_the_score_is_the_weighted_mean_when_that_lies_in_the_worst_band(indexes):
    report = analysis.describe(area(), "en", scored(indexes))
    weights = {layer.key: layer.weight for layer in analysis.LAYERS}
    mean = round(100 * sum(weights[r["key"]] * r["index"] for r in report["layers"]))
    low, high = BANDS[report["level"]]
    assert report["score"] == min(high, max(low, mean))


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
