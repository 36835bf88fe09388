"""Designated zones read pixel by pixel over a real outline: legend classes, the outline's
edge, tile budgets, points and their circles, liquefaction by landform, the report's JSON.

Tiles here are constructed: PNGs painted with the legend's colours by Pillow, inside or
across real outlines from the shipped N03 file. None of them is a recording of the portal.
"""

import dataclasses
import io
import json
import math

import mercantile
import numpy as np
import pytest
import shapely
from PIL import Image

from app.assessment import resolve_place
from app.assessment.errors import PlaceNotFound
from app.assessment.grid import legends, tiles, zones
from app.assessment.registers import outlines
from app.assessment.report.analysis import LAYERS, describe, translate
from app.assessment.report.provenance import outline_edition
from app.assessment.sources import jshis, terms
from app.assessment.sources.jshis import LIQUEFACTION_TENDENCY
from app.assessment.sources.providers import make_provider
from app.assessment.work import keys_for, run_assessment
from app.caches.singleflight import SingleFlightCache
from tests.conftest import job_id_from

FLOOD = "01_flood_l2_shinsuishin_data"
SIZE = tiles.TILE_SIZE


def png(rgba: tuple[int, int, int, int], size: int = SIZE) -> bytes:
    out = io.BytesIO()
    Image.new("RGBA", (size, size), rgba).save(out, "PNG")
    return out.getvalue()


def half_png(left: tuple[int, int, int, int], right: tuple[int, int, int, int]) -> bytes:
    pixels = np.zeros((SIZE, SIZE, 4), dtype=np.uint8)
    pixels[:, : SIZE // 2] = left
    pixels[:, SIZE // 2 :] = right
    out = io.BytesIO()
    Image.fromarray(pixels, "RGBA").save(out, "PNG")
    return out.getvalue()


def inside_tile() -> tuple[mercantile.Tile, shapely.Geometry]:
    """A z16 tile well inside 千代田区's real outline, and that outline."""
    area = resolve_place("千代田区")
    outline = outlines.outline_of(area).geometry
    tile = mercantile.tile(139.7528, 35.6852, 16)  # the Imperial Palace grounds
    assert outline.contains(shapely.box(*mercantile.bounds(tile)))
    return tile, outline


@pytest.mark.parametrize(
    "dataset, zone",
    [(dataset, zone) for dataset, legend in legends.LEGENDS.items() for zone in legend],
    ids=lambda value: getattr(value, "key", value),
)
def test_each_legend_colour_reads_as_its_class(dataset, zone):
    tile, outline = inside_tile()
    # Off by as much as the legend's tolerance on every channel, as a renderer's colours are.
    off = 0 if zone.border else tiles.tolerance(legends.LEGENDS[dataset])
    r, g, b = (c - off if c >= off else c + off for c in zone.rgb)
    reading = tiles.read_tiles(legends.LEGENDS[dataset], outline, [(tile, png((r, g, b, 255)))])
    assert reading.counts[zone.key] == SIZE * SIZE
    assert reading.shares()[zone.key] == 1.0
    others = {k: v for k, v in reading.counts.items() if k != zone.key}
    assert set(others.values()) == {0}


def test_transparent_missing_and_unknown_colours_are_told_apart():
    tile, outline = inside_tile()
    legend = legends.LEGENDS[FLOOD]
    transparent = tiles.read_tiles(legend, outline, [(tile, png((0, 0, 0, 0)))])
    missing = tiles.read_tiles(legend, outline, [(tile, None)])
    coloured = tiles.read_tiles(legend, outline, [(tile, png((0xFF, 0x91, 0x91, 255)))])
    unknown = tiles.read_tiles(legend, outline, [(tile, png((0, 0, 255, 255)))])
    assert transparent.counts[tiles.NO_ZONE] == SIZE * SIZE and transparent.missing == 0
    assert missing.counts[tiles.NO_ZONE] == SIZE * SIZE and missing.missing == 1
    assert coloured.counts["5-10"] == SIZE * SIZE and coloured.counts[tiles.NO_ZONE] == 0
    # A colour of no class is neither a zone nor "no zone".
    assert unknown.counts[tiles.UNRECOGNISED] == SIZE * SIZE
    assert unknown.counts[tiles.NO_ZONE] == 0


def test_a_tile_straddling_the_outline_counts_only_the_pixels_inside():
    tile = mercantile.tile(139.7528, 35.6852, 16)
    west, south, east, north = mercantile.bounds(tile)
    # An outline that covers the tile's western half (and a little beyond it, north, south).
    outline = shapely.box(west - 0.01, south - 0.01, (west + east) / 2, north + 0.01)
    legend = legends.LEGENDS[FLOOD]
    # The western half is 3-5 m deep, the eastern >= 20 m: only the west may count.
    tile_png = half_png((0xFF, 0xB7, 0xB7, 255), (0xDC, 0x7A, 0xDC, 255))
    reading = tiles.read_tiles(legend, outline, [(tile, tile_png)])
    assert reading.counts["3-5"] == SIZE * SIZE // 2
    assert reading.counts["ge20"] == 0
    assert reading.total() == SIZE * SIZE // 2


def test_a_straddling_tile_of_a_real_outline_counts_what_lies_inside():
    area = resolve_place("千代田区")
    outline = outlines.outline_of(area).geometry
    zoom = 15
    edge = next(
        t
        for t in tiles.covering(outline, zoom)
        if not outline.contains(shapely.box(*mercantile.bounds(t)))
    )
    inside = tiles.inside_mask(edge, outline)
    assert 0 < inside.sum() < SIZE * SIZE
    reading = tiles.read_tiles(
        legends.LEGENDS[FLOOD], outline, [(edge, png((0xF7, 0xF5, 0xA9, 255)))]
    )
    assert reading.counts["0.3-0.5"] == inside.sum() == reading.total()


def test_a_tile_budget_forces_a_lower_zoom_and_the_tiles_fit_it():
    outline = outlines.outline_of(resolve_place("浜松市")).geometry
    deep = tiles.zoom_for(outline, 256)
    shallow = tiles.zoom_for(outline, 16)
    assert shallow < deep
    for budget, zoom in ((256, deep), (16, shallow)):
        assert len(tiles.covering(outline, zoom)) <= budget
        assert len(tiles.covering(outline, zoom + 1)) > budget  # the deepest that fits


def test_a_point_covers_a_500_m_circle_in_the_municipality_it_lies_in():
    area = resolve_place("35.6812, 139.7671")  # Tokyo Station
    assert area.code5 == "13101" and area.name_ja == "千代田区"
    assert area.radius_m == 500 and (area.lat, area.lon) == (35.6812, 139.7671)
    circle = outlines.outline_of(area)
    assert circle.kind == "circle"
    # Its area in square metres, near pi r^2.
    k = 111_320 * math.cos(math.radians(area.lat))
    metres2 = circle.geometry.area * 111_320 * k
    assert abs(metres2 / (math.pi * 500**2) - 1) < 0.01
    assert circle.geometry.contains(shapely.Point(area.lon, area.lat))
    # A GSI map URL names the same spot; a point in another ward names that ward.
    url = resolve_place("https://maps.gsi.go.jp/#16/35.681200/139.767100/&base=std")
    assert url.code == area.code
    assert resolve_place("35.6896, 139.7006").name_ja == "新宿区"
    # A ward of a designated city, not the city.
    assert resolve_place("43.0621, 141.3544").name_ja == "札幌市中央区"


def test_one_point_with_two_radii_is_two_areas_with_their_own_meshes():
    # Before: equal and hashed alike, so the mesh cache served the first circle's meshes.
    small = resolve_place("35.6812, 139.7671")
    large = dataclasses.replace(small, radius_m=2000.0)
    assert small != large and len({small, large}) == 2
    assert len(jshis.mesh_keys(large)) > len(jshis.mesh_keys(small)) > 0


@pytest.mark.parametrize("query", ["0.0, 0.0", "35.5, 139.85"])  # far away; Tokyo Bay
def test_a_point_outside_every_outline_is_a_clear_no(query):
    with pytest.raises(PlaceNotFound):
        resolve_place(query)


# The gazetteer's recorded centres of the two cities (their city halls).
@pytest.mark.parametrize(
    ("query", "code5", "centre", "times_the_circle"),
    [
        ("長崎市", "42201", (32.75027778, 129.8777778), 10),
        ("石垣市", "47207", (24.344419, 124.185246), 5),
    ],
)
def test_a_unit_the_main_source_lacks_reads_a_coarser_outline_said_so(
    query, code5, centre, times_the_circle
):
    # Before: geolonia's copy lacks these files, so they read a 3 km circle around the centre.
    area = resolve_place(query)
    assert area.code5 == code5 and (area.lat, area.lon) == pytest.approx(centre)
    outline = outlines.outline_of(area)
    assert outline.kind == "approximate"
    assert outline.note == (
        "coarser outline: N03-21_210101 (2021-01-01) simplified to 1 %, "
        "via smartnews-smri/japan-topography"
    )
    assert shapely.contains_xy(outline.geometry, area.lon, area.lat)
    circle = outlines.circle(area.lat, area.lon, outlines.MISSING_RADIUS_M)
    assert outline.geometry.area > times_the_circle * circle.area  # 長崎市 14x, 石垣市 8x
    meta = outlines.meta()
    assert meta["missing"] == [] and code5 in meta["fallback"]["units"]
    assert "smartnews-smri/japan-topography" in meta["fallback"]["via"]
    credit = "「国土数値情報（行政区域データ）」（国土交通省）を加工して作成"
    assert meta["fallback"]["credit_ja"] == meta["source"]["credit_ja"] == credit
    assert outline_edition(area)[1].startswith("N03-21_210101 (as of 2021-01-01")
    assert outline_edition(resolve_place("千代田区"))[1].startswith("N03-22_220101")


def test_a_point_near_a_coarse_outline_is_named_by_the_better_outline_or_that_unit():
    # In both 長崎市's coarse outline and 長与町's real one: 長与町's.
    assert set(outlines.containing(32.7968, 129.86794)) == {"42201", "42307"}
    assert resolve_place("32.7968, 129.86794").name_ja == "長与町"
    # In no outline, 320 m off 長崎市's coarse one (which may cut its coast): 長崎市.
    assert outlines.containing(32.7239, 129.853) == []
    assert resolve_place("32.7239, 129.853").name_ja == "長崎市"
    with pytest.raises(PlaceNotFound):  # 3 km off it, at sea
        resolve_place("32.8, 129.7")


@pytest.mark.parametrize(
    ("lang", "words"),
    [
        (
            "en",
            [
                "Approximate extent: a coarser outline (the main boundary source lacks this one",
                "N03-21_210101 (as of 2021-01-01, simplified to 1 %), via smartnews-smri",
            ],
        ),
        (
            "ja",
            [
                "概算の範囲：簡素化した境界（行政区域の主な出典にこの境界がないため",
                "N03-21_210101（2021年1月1日時点、1%に簡素化）、smartnews-smri",
            ],
        ),
    ],
)
def test_the_report_says_the_outline_is_coarser_and_whence(client, actions, app, lang, words):
    actions.signup()
    job_id = job_id_from(actions.submit("長崎市", lang))
    assert app.extensions["runner"].wait(10)
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert 'data-extent="approximate"' in page
    credit = outlines.meta()["source"]["credit_" + lang]  # MLIT's, as for every unit
    for text in [*words, credit]:
        assert text in page


@pytest.mark.parametrize(
    "jcode, tendency",
    [
        (20, "high"),
        (19, "high"),
        (14, "high"),
        (15, "high"),  # 三角州・海岸低地
        (16, "high"),  # 砂州・砂礫州
        (17, "high"),  # 砂丘: among the landforms that liquefy most (Matsuoka et al. 2011)
        (13, "moderate"),
        (11, "low"),
        (0, "not_mapped"),
        (1, "very_low"),
        (9, "very_low"),
        (24, "water"),
    ],
)
def test_the_landform_class_maps_to_its_liquefaction_tendency(jcode, tendency):
    assert LIQUEFACTION_TENDENCY[jcode] == tendency
    liquefaction = next(layer for layer in LAYERS if layer.key == "liquefaction")
    row = liquefaction.read({"ground": [{"jcode": jcode, "key": "x"}] * 4})
    assert row["shares"][tendency] == 1.0


@pytest.mark.parametrize(
    "answers",
    [
        [{"jcode": 24, "key": "x"}] * 4,  # a lake
        [{"jcode": 23, "key": "x"}, {"jcode": 24, "key": "y"}],  # a river channel and a lake
        [{"jcode": 0, "key": "x"}, {"jcode": 24, "key": "y"}],  # sea and a lake
        [{"no_data": True, "key": "x"}, {"jcode": 24, "key": "y"}],
    ],
)
def test_liquefaction_over_water_alone_has_no_level(answers):
    # Before: no land read as "very low".
    liquefaction = next(layer for layer in LAYERS if layer.key == "liquefaction")
    row = {"key": "liquefaction", **liquefaction.read({"ground": answers})}
    assert row["state"] == "no_data" and row["index"] is None and row["worst"] is None
    rows = [{"key": k.key, "index": 0.5, "numbers": {}} for k in LAYERS if k.key != "liquefaction"]
    area = resolve_place("千代田区")
    for lang, said in (("ja", "陸域のデータがありません（水域または分類なし）"),
                       ("en", "No data on land (water or not classified)")):  # fmt: skip
        layer = next(r for r in describe(area, lang, [*rows, row])["layers"]
                     if r["key"] == "liquefaction")  # fmt: skip
        assert layer["level"] is None and layer["label"] == said


def assess(query: str) -> dict:
    provider = make_provider({"LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": 0})
    steps = []
    report = run_assessment(
        resolve_place(query),
        "en",
        provider=provider,
        cache=SingleFlightCache(),
        progress=lambda step, percent: steps.append(percent),
    )
    assert steps == sorted(steps)
    return json.loads(json.dumps(report))  # as stored


@pytest.mark.parametrize("query", ["千代田区", "35.6812, 139.7671"])
def test_each_layer_reports_its_shares_worst_class_and_source(query):
    report = assess(query)
    assert report["extent"]["zoom"] >= 12 and report["extent"]["path"].startswith("M")
    for layer in report["layers"]:
        if layer["state"] == "not_published":  # Tokyo's open tsunami data: islands only
            assert layer["key"] == "tsunami" and layer["level"] is None
            continue
        assert layer["mapped"] is True and layer["real"] is False
        shares = layer["shares"]
        assert all(0 <= value <= 1 for value in shares.values())
        if layer["key"] in ("flood", "tsunami"):
            assert abs(sum(shares.values()) - 1) < 1e-3
        for source in layer["source"]:
            assert {"dataset", "provider", "real"} <= source.keys()
    flood = next(layer for layer in report["layers"] if layer["key"] == "flood")
    assert flood["source"][0]["zoom"] == report["extent"]["zoom"]
    assert report["provenance"]["disclaimer_en"]


def test_kyoto_omits_the_landslide_layer_with_the_reason():
    report = assess("京都市中京区")
    landslide = next(layer for layer in report["layers"] if layer["key"] == "landslide")
    assert landslide["mapped"] is False and "京都府" in landslide["omitted"]
    assert not any(name.endswith("_zones") and "slope" in name for name in report["sources"])
    assert report["provenance"]["landslide_terms"]["commercial_use"] == "forbidden"


@pytest.mark.parametrize(
    ("dataset", "key", "kept"),
    [
        ("steep_slope_zones", "26/17/114992/51909", False),
        ("steep_slope_zones", "25/17/114992/51909", True),
        ("flood_zones", "17/114992/51909", True),
        # Kyoto's landslide terms rule its landslide tiles only: its inland-flooding tiles
        # are published under the portal's terms and read.
        ("inland_flood_zones", "26/17/114992/51909", True),
    ],
)
def test_a_prefecture_s_landslide_tiles_are_read_only_where_its_terms_allow(dataset, key, kept):
    assert terms.readable_keys(dataset, [key]) == ([key] if kept else [])


def test_storm_surge_is_not_published_where_there_is_no_coast_with_its_source_and_date():
    report = assess("奈良市")
    storm = next(layer for layer in report["layers"] if layer["key"] == "storm_surge")
    assert storm["state"] == "not_published" and storm["level"] is None
    assert "no coast" in storm["reason"] and "海に面していません" in storm["reason_ja"]
    assert "storm_surge_zones" not in report["sources"]  # not fetched
    said = [s for s in report["provenance"]["services"] if "storm surge" in s["credit_en"]]
    assert said and all("(read 2026-12-04)" in s["credit_en"] for s in said)
    assert any(s["url"] == "https://laws.e-gov.go.jp/law/324AC0000000193" for s in said)
    # A coastal prefecture reads it, with the note that zones are published where designated.
    coastal = assess("大阪市港区")
    storm = next(layer for layer in coastal["layers"] if layer["key"] == "storm_surge")
    assert storm["state"] in ("zones", "no_zone") and storm["notes"]


def test_kyoto_reads_its_inland_flooding_tiles_though_its_landslide_layer_is_omitted():
    # Before: any per-prefecture key of Kyoto was dropped as if it were a landslide tile.
    area = resolve_place("京都市中京区")
    demo = make_provider({"LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": 0})
    keys = keys_for(area, "inland_flood_zones", demo)
    assert keys and all(key.startswith("26/") for key in keys)
    report = assess("京都市中京区")
    inland = next(layer for layer in report["layers"] if layer["key"] == "inland_flood")
    assert inland["mapped"] is True and inland["state"] in ("zones", "no_zone")
    assert "inland_flood_zones" in report["sources"]


OTSU_NEAR_KYOTO = "35.0122, 135.8388"  # 大津市 (Shiga), about 300 m from 京都市山科区


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_a_place_near_a_forbidding_prefecture_reads_none_of_its_tiles_and_says_so(app, lang):
    # Before: Shiga's terms (permitted) let the report read Kyoto's tiles too, whose terms
    # forbid commercial use, and print Shiga's terms alone.
    from flask import render_template
    from markupsafe import escape

    area = resolve_place(OTSU_NEAR_KYOTO)
    assert area.name_ja == "大津市" and zones.plan(area).prefectures == ("25", "26")
    demo = make_provider({"LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": 0})
    for dataset in ("debris_flow_zones", "steep_slope_zones", "landslide_zones"):
        keys = keys_for(area, dataset, demo)
        assert keys and all(key.startswith("25/") for key in keys)
    report = assess(OTSU_NEAR_KYOTO)
    landslide = next(layer for layer in report["layers"] if layer["key"] == "landslide")
    assert landslide["state"] in ("zones", "no_zone")  # Shiga's part is read
    (note,) = [note for note in landslide["notes"] if "京都府" in note["ja"]]
    assert "京都府の部分" in note["ja"] and "in 京都府" in note["en"]
    prov = report["provenance"]
    assert prov["landslide_terms"]["prefecture"] == "滋賀県"
    (kyoto,) = prov["landslide_terms_touched"]
    assert (kyoto["prefecture"], kyoto["commercial_use"]) == ("京都府", "forbidden")
    with app.test_request_context():
        html = render_template("partials/_report.html", report=translate(report, lang))
    said = {"ja": "京都府の部分は読み取っていません", "en": "its part of the extent is not read"}[
        lang
    ]
    assert 'data-prefecture="京都府"' in html and said in html
    assert str(escape(note["ja"] if lang == "ja" else note["en"])) in html


@pytest.mark.parametrize(
    ("key", "query", "coastal"),
    [
        ("tsunami", "横浜市中区", True),
        ("tsunami", "静岡県川根本町", False),
        # The demo's fields differ per dataset: a shore where its storm surge field is high.
        ("storm_surge", "大阪市港区", True),
        ("storm_surge", "静岡県川根本町", False),
    ],
)
def test_the_demo_puts_tsunami_and_storm_surge_zones_only_near_the_sea(key, query, coastal):
    # Before: a smooth field painted tsunami zones anywhere, inland Kyoto and Nagano too.
    sea = next(layer for layer in assess(query)["layers"] if layer["key"] == key)
    assert (1 - sea["shares"]["none"] > 0.05) is coastal
    if not coastal:  # no zone: no level, never "very low"
        assert sea["state"] == "no_zone" and sea["level"] is None
        assert sea["worst"] is None


def test_the_demo_asks_once_per_tile_where_the_sea_is():
    # Tsunami and storm surge both paint near the sea: the coast is worked out once a tile.
    from app.assessment.sources import portal

    portal.paint.cache_clear()
    portal.near_the_sea.cache_clear()
    key = "12/3638/1613"  # Tokyo's bay shore
    portal.paint("tsunami_zones", key)
    portal.paint("storm_surge_zones", key)
    info = portal.near_the_sea.cache_info()
    assert (info.misses, info.hits) == (1, 1)


def test_the_demo_s_inland_flooding_stops_at_0_5_to_3_m():
    # Rain the drains cannot take: the demo paints no inland depth past the 0.5-3 m class.
    from app.assessment.sources import portal

    legend = legends.LEGENDS[portal.ZONE_DATASETS["inland_flood_zones"]]
    deepest = {"0.5-3"} | {zone.key for zone in legend if zone.rank < 4}
    seen: set[str] = set()
    for x in range(3630, 3646):  # a row of z12 tiles across Kanto's plain
        png = portal.paint("inland_flood_zones", f"13/12/{x}/1612")
        if png is None:
            continue
        classes = tiles.classify(tiles.read_rgba(png), legend)
        seen |= {legend[i - 1].key for i in set(classes.ravel().tolist()) if i > 0}
    assert seen and seen <= deepest, seen
    assert "0.5-3" in seen  # it does reach its deepest class


def test_the_demo_s_planned_scale_lies_inside_its_flood_zones_and_is_shallower():
    # Constructed: the planned scale (計画規模) is a smaller flood than the planned maximum,
    # so the demo paints it only where it paints flood, and in a shallower class there.
    from app.assessment.sources import portal

    legend = legends.LEGENDS[portal.ZONE_DATASETS["flood_planned_zones"]]
    painted = shallower = 0
    for x in range(3630, 3646):  # a row of z12 tiles across Kanto's plain
        key = f"12/{x}/1612"
        planned_png, flood_png = (
            portal.paint(ds, key) for ds in ("flood_planned_zones", "flood_zones")
        )
        if planned_png is None:
            continue
        planned = tiles.classify(tiles.read_rgba(planned_png), legend)
        flood = tiles.classify(tiles.read_rgba(flood_png), legend)
        inside = planned > 0
        assert (flood[inside] > 0).all()  # never outside flood's zones
        assert (planned[inside] < flood[inside]).all()  # and shallower at every pixel
        painted += int(inside.sum())
        shallower += int((flood > 0).sum() - inside.sum())
    assert painted and shallower > 0  # painted somewhere, and less than flood


def test_progress_counts_tiles_and_meshes_done_of_those_planned(monkeypatch):
    from app.assessment import work

    monkeypatch.setattr(work, "PROGRESS_SECONDS", 0.0)  # write every change
    # and look often: on a fast machine the tiles are read between two looks of a second
    monkeypatch.setattr(work, "STOP_CHECK_SECONDS", 0.02)
    provider = make_provider({"LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": 0.6})
    steps: list[tuple[str, int]] = []
    run_assessment(
        resolve_place("千代田区"),
        "en",
        provider=provider,
        cache=SingleFlightCache(),
        progress=lambda step, percent: steps.append((step, percent)),
    )
    percents = [percent for _, percent in steps]
    assert percents == sorted(percents)
    # Between the start (0) and "Analysing" (95): more values than the five layers' ends.
    during = {percent for step, percent in steps if step.startswith("layers:")} - {0}
    assert len(during) > len(LAYERS)
