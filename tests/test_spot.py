"""What lies at a point report's spot, how far the nearest zones are, and the map under them.

Tiles are constructed here to the portal's documented legend (legends.LEGENDS, whose colours
docs/providers.md sources): painted by distance from the spot, so the spot's class and the
nearest zone's distance and direction are known in metres. The base map tiles are
constructed stand-ins for GSI's pale map (a flat tint, a road grid and a river), not GSI's
pictures (tests/recorded/README.md).
"""

import base64
import io
import math
import re

import mercantile
import numpy as np
import pytest
from PIL import Image

from app.assessment import resolve_place
from app.assessment.grid import legends, locate, tiles, zones
from app.assessment.grid.sampling import mesh250
from app.assessment.report import maps, spot
from app.assessment.report.analysis import LAYERS, describe, legend_of, translate
from app.assessment.sources import basemap
from app.assessment.sources.portal import ZONE_DATASETS, split_key
from app.assessment.sources.providers import make_provider
from app.assessment.work import run_assessment
from app.caches.singleflight import SingleFlightCache
from tests.conftest import job_id_from, serve_http, signed_in
from tests.test_jobs import attr, poll_until, settled
from tests.test_latin_walk import latin_words
from tests.test_real_providers import RECORDED

SPOT = (35.4540, 139.6380)  # Yokohama, in J-SHIS mesh 5339154113 (the recorded answers')
FLOOD = legends.LEGENDS[ZONE_DATASETS["flood_zones"]]
PLANNED = legends.LEGENDS[ZONE_DATASETS["flood_planned_zones"]]
SLOPE = legends.LEGENDS[ZONE_DATASETS["steep_slope_zones"]]


def zone(legend: tuple, key: str) -> legends.ZoneClass:
    return next(z for z in legend if z.key == key)


AT_SPOT = zone(FLOOD, "1-3")  # painted within HERE_M of the spot
RING = zone(FLOOD, "3-5")
PLANNED_AT_SPOT = zone(PLANNED, "0.3-0.5")  # the planned scale: shallower, and no ring
SPECIAL = zone(SLOPE, "steep_slope_special")
# What the constructed tiles hold, in metres east and north of the spot:
HERE_M = 40  # flood 1-3 m within 40 m of the spot, 3-5 m in a ring 200-230 m out
SQUARE = (76, 136)  # a steep-slope special zone: the square [76, 136] m east and north
NEAR_SLOPE_M = math.hypot(76, 76)  # its corner nearest the spot: 107.5 m to the north-east


def offsets(tile: mercantile.Tile) -> tuple[np.ndarray, np.ndarray]:
    lons, lats = tiles.pixel_centres(tile)
    return locate.offsets_m(*SPOT, lats, lons)


def png(rgba: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(out, "PNG")
    return out.getvalue()


def painted(dataset: str, key: str) -> bytes | None:
    """A constructed portal tile: the dataset's zones placed around SPOT, or None (404)."""
    tile = tiles.parse_tile_key(split_key(key)[1])  # landslide keys start with the prefecture
    east, north = offsets(tile)
    distance = np.hypot(east, north)
    rgba = np.zeros((tiles.TILE_SIZE, tiles.TILE_SIZE, 4), dtype=np.uint8)
    if dataset == "flood_zones":
        paint = {AT_SPOT: distance <= HERE_M, RING: (distance >= 200) & (distance <= 230)}
    elif dataset == "flood_planned_zones":
        paint = {PLANNED_AT_SPOT: distance <= HERE_M}
    elif dataset == "steep_slope_zones":
        low, high = SQUARE
        square = (east >= low) & (east <= high) & (north >= low) & (north <= high)
        paint = {SPECIAL: square}
    else:
        return None
    for zone, where in paint.items():
        rgba[where] = (*zone.rgb, 255)
    return png(rgba) if rgba[..., 3].any() else None


def pale(key: str) -> bytes:
    """A constructed stand-in for a pale-map tile: a tint, roads every 64 px, a river."""
    rgba = np.full((256, 256, 4), (242, 240, 234, 255), dtype=np.uint8)
    rgba[::64, :, :3] = rgba[:, ::64, :3] = (200, 200, 200)
    rgba[100:110, :, :3] = (190, 215, 240)
    return png(rgba)


class Stand:
    """The portal, J-SHIS and GSI's tiles, answering from the constructions above."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.url = ""
        self.ids = {dataset_id: name for name, dataset_id in ZONE_DATASETS.items()}

    def count(self, fragment: str) -> int:
        return sum(fragment in hit for hit in self.hits)

    def respond(self, path: str):
        self.hits.append(path)
        if "/pshm/" in path:
            return 200, (RECORDED / "jshis_pshm_ok.geojson").read_bytes(), {}
        if "/sstrct/" in path:
            return 200, (RECORDED / "jshis_sstrct_ok.geojson").read_bytes(), {}
        if path.startswith("/pale/"):
            return 200, pale(path.removeprefix("/pale/")), {"Content-Type": "image/png"}
        if path.startswith("/portal/"):
            dataset_id, key = path.removeprefix("/portal/").split("/", 1)
            body = painted(self.ids[dataset_id], key.removesuffix(".png"))
            if body is not None:
                return 200, body, {"Content-Type": "image/png"}
        return 404, b"Not Found", {}


@pytest.fixture
def stand():
    with serve_http(Stand()) as state:
        yield state


def real(stand: Stand) -> dict:
    return {
        "LAYER_PROVIDER": "real",
        "JSHIS_BASE_URL": stand.url + "/jshis",
        "HAZARD_PORTAL_URL": stand.url + "/portal",
        "BASEMAP_URL": stand.url + "/pale",
        "EVACUATION_SITES_URL": stand.url + "/gsi",  # no site tile: 404 (test_sites places some)
        "LAYER_HTTP_TIMEOUT_SECONDS": 2,
    }


# --- the pixel work: pure, one line per case ----------------------------------------------


@pytest.mark.parametrize(
    ("bearing", "point"),
    [(0, "N"), (22.4, "N"), (22.6, "NE"), (45, "NE"), (90, "E"), (135, "SE"), (180, "S"),
     (225, "SW"), (270, "W"), (315, "NW"), (337.4, "NW"), (337.6, "N"), (359.9, "N")],
)  # fmt: skip
def test_eight_points_of_the_compass(bearing, point) -> None:
    assert locate.compass(bearing) == point


@pytest.mark.parametrize(
    ("metres", "said"), [(3, 10), (14, 10), (107.5, 110), (124, 120), (995, 1000), (1260, 1300)]
)
def test_distances_are_rounded_as_a_reader_wants_them(metres, said) -> None:
    assert spot.rounded(metres) == said


@pytest.mark.parametrize(
    ("kind", "en", "ja"),
    [
        ("steep_slope", "steep slope: on a planned zone's dashed border",
         "急傾斜地：指定予定区域の境界線上"),
        ("debris_flow", "debris flow: on a planned zone's dashed border",
         "土石流：指定予定区域の境界線上"),
    ],
)  # fmt: skip
def test_a_spot_on_a_planned_zone_s_border_says_so_in_words(kind, en, ja) -> None:
    # Before: the raw key (steep_slope_planned_border) in both languages.
    legend = legends.LEGENDS[ZONE_DATASETS[f"{kind}_zones"]]
    border = next(i for i, z in enumerate(legend, 1) if z.border)
    said = spot.zone_spot([(legend, border, {})], legend_of("landslide"))["at_point"]
    assert said == {"key": f"{kind}_planned_border", "en": en, "ja": ja}


def test_a_report_stored_with_the_border_s_raw_key_reads_in_words() -> None:
    raw = "steep_slope_planned_border"
    rows = [{"key": layer.key, "index": 0.3, "numbers": {}} for layer in LAYERS]
    rows[3] |= {"at_point": {"key": raw, "en": raw, "ja": raw}}
    at = describe(resolve_place(f"{SPOT[0]}, {SPOT[1]}"), "ja", rows)["layers"][3]["at_point"]
    assert (at["key"], at["ja"]) == (raw, "急傾斜地：指定予定区域の境界線上")


@pytest.mark.parametrize(
    ("query", "by_spot"),
    [("東京都千代田区丸の内1-9-1", False), (f"{SPOT[0]}, {SPOT[1]}", True)],
)
def test_an_address_placed_at_its_chome_is_headed_by_its_circle(app, query, by_spot) -> None:
    # Before: the town's representative point headed the report (level 1 there) while a
    # special warning zone lay within the circle (level 5).
    from flask import render_template

    area = resolve_place(query)
    at = {"landslide": "none", "seismic": "lt0.1"}
    index = {"flood": None, "tsunami": None, "storm_surge": None, "inland_flood": None,
             "house_collapse": None, "flood_duration": None, "flood_planned": None,
             "liquefaction": 0.1, "landslide": 0.9, "seismic": 0.1}  # fmt: skip
    rows = [
        {"key": layer.key, "index": index[layer.key], "numbers": {}, "legend": legend_of(layer.key),
         "worst": "steep_slope_special" if layer.key == "landslide" else None,
         "state": "no_zone" if index[layer.key] is None else None,
         **({"at_point": {"key": at[layer.key], "en": "x", "ja": "x"}} if layer.key in at else {})}
        for layer in LAYERS
    ]  # fmt: skip
    for lang in ("ja", "en"):
        described = describe(area, lang, rows, spot=True)
        assert ("circle" in described) is by_spot
        assert described["level"] == (1 if by_spot else 5)
        if by_spot:
            continue
        report = {"area": area.to_dict(), "lang": lang, "provider": "demo",
                  "generated_at": "2026-12-01T00:00:00+00:00", **described}  # fmt: skip
        assert translate(report, lang)["level"] == 5
        with app.test_request_context():
            html = render_template("partials/_report.html", report=report)
        whose = "町丁目の代表点" if lang == "ja" else "representative point of the 町丁目"
        assert whose in described["narrative"] and whose in html
        # The English reader gets the 町丁目 in romaji and no kana reading of the ward.
        assert ("Marunouchi 1-chome (丸の内一丁目)" in html) is (lang == "en")
        assert (f'<dd lang="ja">{area.name_kana}</dd>' in html) is (lang == "ja")
        assert ">この地点<" not in html and ">At the spot<" not in html
        assert "この地点：" not in html and "At the spot: " not in html


def test_the_pixel_under_the_spot_is_the_one_that_holds_it() -> None:
    tile, col, row = locate.pixel_of(*SPOT, 17)
    west, south, east, north = mercantile.bounds(tile)
    lons, lats = tiles.pixel_centres(tile)
    # Its centre is within half a pixel of the spot, both ways.
    assert abs(lons[row, col] - SPOT[1]) <= (east - west) / 512
    assert abs(lats[row, col] - SPOT[0]) <= (north - south) / 512
    classes = tiles.decode(painted("flood_zones", tiles.tile_key(tile)), FLOOD)
    assert locate.class_at(classes, col, row) == FLOOD.index(AT_SPOT) + 1


def test_the_nearest_zone_is_the_square_s_corner_to_the_north_east() -> None:
    tile, _, _ = locate.pixel_of(*SPOT, 17)
    found: locate.Nearest = {}
    for t in mercantile.tiles(
        SPOT[1] - 0.003, SPOT[0] - 0.003, SPOT[1] + 0.003, SPOT[0] + 0.003, 17
    ):
        body = painted("steep_slope_zones", tiles.tile_key(t))
        classes = tiles.decode(body, SLOPE)
        inside = np.ones_like(classes, dtype=bool)
        locate.merge_nearest(found, locate.nearest(t, classes, inside, *SPOT))
    ((index, (metres, bearing)),) = found.items()
    assert index == SLOPE.index(SPECIAL) + 1
    assert abs(metres - NEAR_SLOPE_M) < 2.0  # a pixel is 1 m here
    assert locate.compass(bearing) == "NE" and abs(bearing - 45) < 2


def test_pixels_outside_the_outline_are_not_the_nearest() -> None:
    tile, _, _ = locate.pixel_of(*SPOT, 17)
    classes = np.full((256, 256), 1, dtype=np.int8)
    assert locate.nearest(tile, classes, np.zeros((256, 256), dtype=bool), *SPOT) == {}


def test_a_shrunk_tile_keeps_the_worst_class_of_each_block() -> None:
    classes = np.zeros((256, 256), dtype=np.int8)
    classes[0:2, 0:2] = 1
    classes[1, 1] = 2  # one pixel of the worse class in the first 2 x 2 block
    classes[2, 2] = -1  # unrecognised ranks below no zone
    ranks = np.array([-1, 0, 1, 2], dtype=np.int16)
    small = locate.shrink(classes, 2, ranks)
    assert small.shape == (128, 128)
    assert small[0, 0] == 2 and small[1, 1] == 0 and (small[2:] == 0).all()


@pytest.mark.parametrize(
    "ranks",
    [[-1, 0, 1, 2, 3], [-1, 0, 3, 1, 2], [-1, 0, 1, 2, 0]],  # in class order, not, tied
    ids=["ordered", "reordered", "tied"],
)
def test_a_shrunk_tile_is_each_block_s_first_pixel_of_its_worst_rank(ranks) -> None:
    # Block by block, as plainly as it can be said; shrink works whole arrays at once.
    rng = np.random.default_rng(len(ranks) + ranks[2])
    ranks = np.array(ranks, dtype=np.int16)
    classes = np.zeros((256, 256), dtype=np.int8)
    classes[40:220, 10:200] = rng.integers(-1, len(ranks) - 1, (180, 190))
    classes[rng.random((256, 256)) < 0.3] = 0
    for factor in (2, 8, 256):
        size = 256 // factor
        expected = np.empty((size, size), dtype=np.int8)
        for row in range(size):
            for col in range(size):
                block = classes[
                    row * factor : (row + 1) * factor, col * factor : (col + 1) * factor
                ]
                flat = block.ravel()
                expected[row, col] = flat[int(np.argmax(ranks[flat.astype(np.int16) + 1]))]
        assert (locate.shrink(classes, factor, ranks) == expected).all(), factor
    assert not locate.shrink(np.zeros((256, 256), dtype=np.int8), 4, ranks).any()


def test_the_zone_raster_puts_each_tile_in_its_place() -> None:
    area = resolve_place(f"{SPOT[0]}, {SPOT[1]}")
    plan = zones.plan(area)
    raster = maps.ZoneRaster(FLOOD, plan.outline.geometry.bounds, plan.zoom)
    for tile in plan.tiles:
        classes = tiles.decode(painted("flood_zones", tiles.tile_key(tile)), FLOOD)
        raster.add(tile, locate.shrink(classes, raster.factor, raster.ranks))
    # The spot's pixel in the raster is the 1-3 m class it was painted with, at the
    # zoom read: a point's circle is kept whole (factor 1).
    assert raster.factor == 1
    x, y = maps._global_px(SPOT[1], SPOT[0], plan.zoom)
    assert raster.classes[int(y) - raster.y0, int(x) - raster.x0] == FLOOD.index(AT_SPOT) + 1
    height, width = raster.classes.shape
    drawn = raster.drawn()
    picture = Image.open(io.BytesIO(base64.b64decode(drawn["png"].split(",", 1)[1])))
    assert picture.mode == "P" and picture.size == (width, height)
    assert drawn["metres_per_pixel"] < 1.5  # zoom 17, as read: not the 48-cell grid


# --- a point report, end to end --------------------------------------------------------------


def point_report(provider, cache=None) -> dict:
    return run_assessment(
        resolve_place(f"{SPOT[0]}, {SPOT[1]}"),
        "ja",
        provider=provider,
        cache=cache if cache is not None else SingleFlightCache(maxsize=4096),
        progress=lambda step, percent: None,
    )


def layer(report: dict, key: str) -> dict:
    return next(row for row in report["layers"] if row["key"] == key)


def test_a_point_report_says_what_lies_at_the_spot_and_how_far_the_zones_are(stand) -> None:
    report = point_report(make_provider(real(stand)))
    flood = layer(report, "flood")
    assert flood["at_point"] == {"key": "1-3", "en": AT_SPOT.label_en, "ja": AT_SPOT.label_ja}
    assert flood["worst"] == "3-5"  # the circle's worst, beside the spot's
    assert flood["nearest"]["1-3"] == {"metres": 0, "bearing": None, "direction": ""}
    ring = flood["nearest"]["3-5"]
    assert ring["metres"] == 200 and ring["direction"] in locate.COMPASS
    slope = layer(report, "landslide")
    assert slope["at_point"]["key"] == "none"
    assert slope["nearest"] == {
        "steep_slope_special": {"metres": 110, "bearing": 45, "direction": "NE"}
    }
    assert layer(report, "tsunami")["at_point"]["key"] == "none"
    assert layer(report, "tsunami")["nearest"] == {}
    # The planned scale's pixel at the spot, shown (0.3-0.5 m there), never a level.
    at_scale = layer(report, "flood_planned")
    said = {"key": "0.3-0.5", "en": "0.3 to 0.5 m", "ja": "0.3m以上0.5m未満"}
    assert at_scale["at_point"] == said
    assert at_scale["nearest"] == {"0.3-0.5": {"metres": 0, "bearing": None, "direction": ""}}
    assert (at_scale["state"], at_scale["level"], at_scale["worst"]) == ("shown", None, "0.3-0.5")
    # The mesh layers name the spot's 250 m mesh: JCODE 15 (a delta: high), 40.6 % (26 % or more).
    liquefaction, seismic = layer(report, "liquefaction"), layer(report, "seismic")
    assert liquefaction["at_point"] == {
        "key": "high", "en": "high", "ja": "高い", "mesh": mesh250(*SPOT)
    }  # fmt: skip
    assert seismic["at_point"]["key"] == "ge26" and seismic["at_point"]["mesh"] == "5339154113"


def test_a_point_report_is_headed_by_its_spot_with_the_circle_beside_it(stand) -> None:
    report = point_report(make_provider(real(stand)))
    # At the spot: flood 1-3 m (level 3), no landslide zone, a high liquefaction tendency
    # (5) and shaking of 26 % or more (5); the planned scale's 0.3-0.5 m is not weighed.
    # Within the circle the 3-5 m ring (4) and the steep-slope special zone (5) count too.
    assert report["level"] == 5 and report["worst"] == ["liquefaction", "seismic"]
    circle = report["circle"]
    assert circle["level"] == 5 and circle["worst"] == ["liquefaction", "landslide", "seismic"]
    # Scores by the one rule (weights 25/15/15/15/30, indexes 0.5/0.7/0.9): the spot's
    # mean 0.757 raised to level 5's foot, 80; the circle's 0.841, 84.
    assert (report["score"], circle["score"], circle["radius_m"]) == (80, 84, 500)
    assert layer(report, "flood")["level"] == 4  # each layer's row stays the circle's
    assert report["narrative"].startswith("この地点（")
    assert "半径500mの円内で最も厳しいのは液状化・土砂災害・地震の揺れ" in report["narrative"]
    assert "円全体の総合スコアは84点" in report["narrative"]
    # The other language says the same headline; a report stored before spots had
    # headlines (no circle) keeps the circle's in both.
    english = translate(report, "en")
    assert (english["score"], english["worst"]) == (80, report["worst"])
    assert english["circle"] == {**circle, "score_label": "Very high"}
    assert english["narrative"].startswith("At the spot near ")
    assert "the circle's overall score is 84" in english["narrative"]
    older = translate({k: v for k, v in report.items() if k != "circle"}, "en")
    assert (older["score"], older["worst"]) == (84, circle["worst"]) and "circle" not in older


def test_the_spot_costs_no_extra_call_and_the_base_map_its_tiles(stand) -> None:
    area = resolve_place(f"{SPOT[0]}, {SPOT[1]}")
    plan = zones.plan(area)
    assert plan.zoom == spot.SPOT_ZOOM  # a point's circle is read at the deepest zoom
    report = point_report(make_provider(real(stand)))
    for dataset_id in ZONE_DATASETS.values():  # the spot's tile is one of the plan's
        assert stand.count(f"/portal/{dataset_id}/") == len(plan.tiles)
    zoom, wanted = basemap.plan(maps.view_box(plan.outline.geometry.bounds))
    assert stand.count("/pale/") == len(wanted) <= basemap.TILE_BUDGET
    assert all(hit.startswith(f"/pale/{zoom}/") for hit in stand.hits if "/pale/" in hit)
    drawn = report["map"]
    assert drawn["base"].startswith("data:image/png;base64,") and drawn["base_zoom"] == zoom
    assert drawn["credit"]["ja"].startswith("地理院タイル")
    assert drawn["spot"] == [500.0, 500.0]  # the circle's centre
    assert drawn["scale"] == {"metres": 200, "units": 200.0, "label": "200 m"}
    # A second report of the spot, on a cache the first filled, asks nothing again.
    cache = SingleFlightCache(maxsize=4096)
    point_report(make_provider(real(stand)), cache)
    before = len(stand.hits)
    point_report(make_provider(real(stand)), cache)
    assert len(stand.hits) == before


def test_a_failing_base_map_leaves_the_zones_and_says_so(stand) -> None:
    respond = stand.respond
    stand.respond = lambda path: (500, b"", {}) if "/pale/" in path else respond(path)
    settings = {**real(stand), "LAYER_HTTP_RETRIES": 0}
    report = point_report(make_provider(settings))
    assert report["map"]["base"] is None and report["map"]["base_reason"] == "unavailable"
    assert layer(report, "flood")["at_point"]["key"] == "1-3"


def test_the_demo_draws_no_base_map_and_reads_nothing_from_gsi() -> None:
    demo = make_provider({"LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": 0})
    report = point_report(demo)
    assert report["map"]["base"] is None and report["map"]["base_reason"] == "demo"
    assert report["map"]["credit"] is None
    assert all("at_point" in row for row in report["layers"])


def test_a_municipality_s_report_has_no_spot() -> None:
    demo = make_provider({"LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": 0})
    report = run_assessment(
        resolve_place("東京都中央区"),
        "en",
        provider=demo,
        cache=SingleFlightCache(maxsize=4096),
        progress=lambda step, percent: None,
    )
    assert report["map"]["spot"] is None and "circle" not in report
    assert not any("at_point" in row or "nearest" in row for row in report["layers"])
    assert layer(report, "flood")["rasters"] or layer(report, "flood")["worst"] is None


def test_the_report_page_and_json_carry_the_spot(make_app, stand) -> None:
    app, client, actions = signed_in(make_app, **real(stand))
    job_id = job_id_from(actions.submit(f"{SPOT[0]},{SPOT[1]}", lang="ja"))
    assert attr(poll_until(client, job_id, settled), "data-status") == "succeeded"
    report = client.get(f"/assessments/{job_id}/report.json").get_json()
    flood = layer(report, "flood")
    assert flood["at_point"]["key"] == "1-3" and flood["nearest"]["3-5"]["metres"] == 200
    assert set(flood["rasters"]) == {"flood_zones"}
    page = client.get(f"/assessments/{job_id}?lang=ja").get_data(as_text=True)
    assert 'data-base-map="yes"' in page and 'id="report-base"' in page
    assert page.count('href="data:image/png;base64,') == 1 + len(
        [row for row in report["layers"] for _ in row.get("rasters", {})]
    )  # the base map once, shared by every map; each dataset's zones once
    assert "この地点" in page and "北東へ約110m" in page and "地理院タイル" in page
    assert 'data-circle-level="5" data-circle-score="84"' in page
    assert "この地点の総合スコア" in page and "半径500mの円内で最も厳しい項目" in page
    assert 'class="report-pin"' in page and 'data-metres="200"' in page
    # What this change writes (the spot's lines, the maps, their notes) is Japanese only.
    head = page[page.index('<div class="report-spot-head"') : page.index('<h3 id="report-score')]
    start = page.index('<section class="report-zones"')
    zones_part = page[start : page.index('<div class="report-table-wrap"', start)]
    assert latin_words(head) == [] and latin_words(zones_part) == []
    english = client.get(f"/assessments/{job_id}?lang=en").get_data(as_text=True)
    assert "about 110 m north-east" in english and "At the spot" in english


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_the_water_maps_a_broker_shows_are_each_said_never_an_unread_one_as_none(app, lang):
    from flask import render_template

    area = resolve_place(f"{SPOT[0]}, {SPOT[1]}")
    water = ("flood", "inland_flood", "storm_surge")
    said = {}
    for state in ("zones", "no_zone", "not_published", "before"):
        # "before": a report stored before inland flooding and storm surge were read has
        # no rows for them (flood found zones).
        rows = [
            {"key": layer.key, "index": 0.5 if layer.key in water else 0.1, "numbers": {},
             "legend": legend_of(layer.key),
             **({"state": state} if layer.key in water and state not in ("zones", "before")
                else {}),
             **({"worst": "3-5", "at_point": {"key": "0.5-3", "en": "0.5-3 m", "ja": "0.5〜3m"}}
                if layer.key in water and state in ("zones", "before") else {})}
            for layer in LAYERS
            if state != "before" or layer.key not in ("inland_flood", "storm_surge")
        ]  # fmt: skip
        report = {"area": area.to_dict(), "lang": lang, "provider": "demo",
                  "generated_at": "2026-12-01T00:00:00+00:00",
                  **describe(area, lang, rows, spot=True)}  # fmt: skip
        with app.test_request_context():
            html = render_template("partials/_report.html", report=report)
        block = html[html.index("data-jusetsu") :]
        block = block[: block.index("</section>")]
        maps = dict(re.findall(r'data-jusetsu-map="(\w+)" data-state="(\w+)"', block))
        if state == "before":
            assert maps == {"flood": "zones", "inland": "not_read", "storm_surge": "not_read"}
        else:  # each of the three maps as its layer read it
            assert maps == {"flood": state, "inland": state, "storm_surge": state}
        said[state] = re.sub(r"<[^>]+>", "", block)
        # The same spot on the portal's own map, one click away.
        portal = "https://disaportal.gsi.go.jp/hazardmap/maps/index.html?ll="
        assert f'{portal}{SPOT[0]:.6f},{SPOT[1]:.6f}&amp;z=16&amp;base=pale"' in block
    ja = lang == "ja"
    assert ("この地点：0.5〜3m" if ja else "at the spot: 0.5-3 m") in said["zones"]
    assert (
        "半径500mの円内に浸水想定区域はありません" if ja else "no inundation zone within 500 m"
    ) in said["no_zone"]
    asked = "お問い合わせください" if ja else f"ask {area.name_romaji}, {area.prefecture_romaji}."
    assert asked in said["not_published"]
    # Each map's zones are read and said, with the source each came from.
    sources = ("雨水出水", "高潮浸水想定区域") if ja else ("inland (stormwater)", "storm surge")
    assert all(source in said["zones"] for source in sources)
    assert ("読み取っていません" if ja else "not read by this report") not in said["zones"]
    assert said["no_zone"].count("半径500mの円内に浸水想定区域はありません" if ja
                                 else "no inundation zone within 500 m") == 3  # fmt: skip
    # A report stored before they were read says they are not read, never "no zone".
    assert said["before"].count("読み取っていません" if ja else "not read by this report") == 2
