"""The portal's tiles read as the portal publishes them: its legends, colour by colour.

Every colour below is typed in from the portal's legend images (docs/providers.md cites
each), not taken from the app's tables, so a table that drifts from the published legend
fails here. Tiles are constructed to those legends (tests/recorded/README.md): a colour
at full alpha, at partial alpha as an anti-aliased edge is drawn (straight and faded to
black), and a planned zone with its dark-blue dashed border. None is a recording.
"""

import io

import mercantile
import numpy as np
import pytest
import shapely
from PIL import Image

from app.assessment import resolve_place
from app.assessment.grid import legends, tiles, zones
from app.assessment.registers import outlines
from app.assessment.report import analysis, readings
from app.assessment.sources import portal
from app.assessment.sources.portal import ZONE_DATASETS, judge, split_key

SIZE = tiles.TILE_SIZE
FLOOD, TSUNAMI = "01_flood_l2_shinsuishin_data", "04_tsunami_newlegend_data"
SURGE, INLAND = "03_hightide_l2_shinsuishin_data", "02_naisui_pref_data"
DEBRIS, SLOPE, SLIDE = (
    "05_dosekiryukeikaikuiki_data",
    "05_kyukeishakeikaikuiki_data",
    "05_jisuberikeikaikuiki_data",
)
# shinsui_legend3.png: the depth legend of the flood and new-legend tsunami tiles.
DEPTH = [
    ("#FFFFB3", "lt0.3", 2),
    ("#F7F5A9", "0.3-0.5", 2),
    ("#F8E1A6", "0.5-1", 3),  # above floor level: never "under 0.5 m"
    ("#FFD8C0", "1-3", 3),
    ("#FFB7B7", "3-5", 4),
    ("#FF9191", "5-10", 5),
    ("#F285C9", "10-20", 5),
    ("#DC7ADC", "ge20", 5),
]
# naisui_legend.png, as public projects record it: the same colours; depths under 0.1 m
# are not drawn, and a map with no 0.3 m or 1 m step paints 0.1-0.5 m and 0.5-3 m in the
# 0.3-0.5 m and 1-3 m colours.
INLAND_DEPTH = [
    ("#FFFFB3", "lt0.3", 2),
    ("#F7F5A9", "lt0.5", 2),
    ("#F8E1A6", "0.5-1", 3),
    ("#FFD8C0", "0.5-3", 3),
    ("#FFB7B7", "3-5", 4),
    ("#FF9191", "5-10", 5),
    ("#F285C9", "10-20", 5),
    ("#DC7ADC", "ge20", 5),
]
# keikai_dosekiryu.png, keikai_kyukeisya.png, keikai_jisuberi.png: designated warning and
# special warning zones, then planned (指定予定) ones, a level below.
LANDSLIDE = [
    (DEBRIS, "#E6C832", "debris_flow_warning", 3),
    (DEBRIS, "#A50021", "debris_flow_special", 5),
    (DEBRIS, "#EBD35B", "debris_flow_planned_warning", 2),
    (DEBRIS, "#B7334D", "debris_flow_planned_special", 4),
    (SLOPE, "#FAE600", "steep_slope_warning", 3),
    (SLOPE, "#FA2800", "steep_slope_special", 5),
    (SLOPE, "#FBEB33", "steep_slope_planned_warning", 2),
    (SLOPE, "#FB5333", "steep_slope_planned_special", 4),
    (SLIDE, "#FF9900", "landslide_warning", 3),
    (SLIDE, "#B40028", "landslide_special", 5),
    (SLIDE, "#FFAD33", "landslide_planned_warning", 2),
    (SLIDE, "#C33353", "landslide_planned_special", 4),
]
PUBLISHED = (
    [(d, c, k, lv) for d in (FLOOD, TSUNAMI, SURGE) for c, k, lv in DEPTH]
    + [(INLAND, c, k, lv) for c, k, lv in INLAND_DEPTH]
    + LANDSLIDE
)
# House collapse (氾濫流, 河岸侵食) and flood duration, in the colours public projects record
# (unconfirmed against GSI's legend images; docs/providers.md): a house-collapse zone is
# level 5, a duration sets no level (0): a detail of flood.
COLLAPSE_FLOW, COLLAPSE_BANK = (
    "01_flood_l2_kaokutoukai_hanran_data",
    "01_flood_l2_kaokutoukai_kagan_data",
)
DURATION = "01_flood_l2_keizoku_data"
UNCONFIRMED_COLOURS = [
    (COLLAPSE_FLOW, "#FF0000", "house_collapse_flow", 5),
    (COLLAPSE_BANK, "#FF0000", "house_collapse_bank", 5),
    (DURATION, "#A0D2FF", "lt12h", 0),
    (DURATION, "#0041FF", "12h-1d", 0),
    (DURATION, "#FAF500", "1d-3d", 0),
    (DURATION, "#FF9900", "3d-1w", 0),
    (DURATION, "#FF2800", "1w-2w", 0),
    (DURATION, "#B40068", "2w-4w", 0),
    (DURATION, "#600060", "ge4w", 0),
]
BORDER = (0x1E, 0x3C, 0x8C)  # a dark blue, as the legends draw a planned zone's dashes


def rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def encode(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8), "RGBA").save(out, "PNG")
    return out.getvalue()


def filled(colour: tuple[int, ...], alpha: int = 255) -> bytes:
    pixels = np.zeros((SIZE, SIZE, 4), dtype=np.uint8)
    pixels[..., :3], pixels[..., 3] = colour, alpha
    return encode(pixels)


def planned_zone(fill: tuple[int, int, int]) -> bytes:
    """A planned zone: a filled square, its dark-blue dashed border, an anti-aliased rim."""
    pixels = np.zeros((SIZE, SIZE, 4), dtype=np.uint8)
    pixels[64:192, 64:192] = (*fill, 255)
    dashes = (np.arange(SIZE) // 6) % 2 == 0  # 6 px on, 6 px off
    for edge in (64, 65, 190, 191):
        pixels[edge, 64:192][dashes[64:192]] = (*BORDER, 255)
        pixels[64:192, edge][dashes[64:192]] = (*BORDER, 255)
    pixels[63, 64:192] = (*fill, 96)  # the rim at partial alpha, straight
    pixels[192, 64:192] = (*(c * 96 // 255 for c in fill), 96)  # and premultiplied
    return encode(pixels)


def inside_tile() -> tuple[mercantile.Tile, shapely.Geometry]:
    area = resolve_place("千代田区")
    tile = mercantile.tile(139.7528, 35.6852, 16)  # the Imperial Palace grounds
    return tile, outlines.outline_of(area).geometry


@pytest.mark.parametrize(("path", "colour", "key", "level"), PUBLISHED)
def test_each_published_colour_reads_as_its_class_and_sets_its_level(path, colour, key, level):
    tile, outline = inside_tile()
    reading = tiles.read_tiles(legends.LEGENDS[path], outline, [(tile, filled(rgb(colour)))])
    assert reading.counts[key] == SIZE * SIZE
    zone = next(zone for zone in legends.LEGENDS[path] if zone.key == key)
    assert zone.level == level and zone.colour == colour and zone.source.endswith(".png")
    assert zone.planned == ("planned" in key)


# 01_flood_l1_shinsuishin_newlegend_data, the planned scale (計画規模, 現在の凡例): GSI's own
# layer configuration (gsimaps, layers_kasaneruhazardmap.txt) links it to the same image as
# the planned maximum, shinsui_legend3.png, so the same eight colours; a detail of flood,
# shown and never weighed, so no class sets a level (0).
PLANNED = "01_flood_l1_shinsuishin_newlegend_data"
PLANNED_IMAGE = "https://disaportal.gsi.go.jp/maps/image/legend/shinsui_legend3.png"


@pytest.mark.parametrize(("colour", "key", "level"), DEPTH)
def test_the_planned_scale_reads_the_depth_legend_and_sets_no_level(colour, key, level):
    tile, outline = inside_tile()
    reading = tiles.read_tiles(legends.LEGENDS[PLANNED], outline, [(tile, filled(rgb(colour)))])
    assert reading.counts[key] == SIZE * SIZE
    zone = next(zone for zone in legends.LEGENDS[PLANNED] if zone.key == key)
    assert zone.colour == colour and zone.level == 0 and zone.source == PLANNED_IMAGE
    at_maximum = next(zone for zone in legends.LEGENDS[FLOOD] if zone.key == key)
    assert (zone.rank, zone.label_en, zone.label_ja) == (
        at_maximum.rank,
        at_maximum.label_en,
        at_maximum.label_ja,
    )
    assert ZONE_DATASETS["flood_planned_zones"] == PLANNED


@pytest.mark.parametrize(("path", "colour", "key", "level"), UNCONFIRMED_COLOURS)
def test_house_collapse_and_duration_colours_read_as_their_class_and_say_whose_word(
    path, colour, key, level
):
    tile, outline = inside_tile()
    reading = tiles.read_tiles(legends.LEGENDS[path], outline, [(tile, filled(rgb(colour)))])
    assert reading.counts[key] == SIZE * SIZE
    zone = next(zone for zone in legends.LEGENDS[path] if zone.key == key)
    assert zone.level == level and zone.colour == colour
    assert zone.source.startswith("unconfirmed")  # no GSI legend image was found for them


def test_a_one_colour_legend_keeps_a_tolerance_of_its_own():
    # House collapse has one class per dataset: no two colours to keep apart.
    legend = legends.LEGENDS[COLLAPSE_FLOW]
    assert tiles.tolerance(legend) == tiles.SINGLE_TOLERANCE
    near, far = (255 - tiles.SINGLE_TOLERANCE, 0, 0, 255), (255, 0, 80, 255)
    assert tiles.classify(np.array([[near, far]]), legend).tolist() == [[1, -1]]


@pytest.mark.parametrize(
    "path", [p for p in legends.LEGENDS if len(legends.zones_of(legends.LEGENDS[p])) > 1]
)
def test_the_tolerance_is_below_half_the_distance_of_the_two_closest_colours(path):
    legend = legends.LEGENDS[path]
    colours = [zone.rgb for zone in legends.zones_of(legend)]
    closest = min(
        int(tiles.distance(a, b)) for i, a in enumerate(colours) for b in colours[i + 1 :]
    )
    assert 2 * tiles.tolerance(legend) < closest
    # So a colour between the two closest ones reads as neither, never as the wrong one.
    a, b = sorted(
        ((a, b) for i, a in enumerate(colours) for b in colours[i + 1 :]),
        key=lambda pair: int(tiles.distance(*pair)),
    )[0]
    middle = tuple((x + y) // 2 for x, y in zip(a, b, strict=True))
    classes = tiles.classify(np.array([[(*middle, 255)]]), legend)
    assert classes[0, 0] == -1 or int(tiles.distance(middle, colours[classes[0, 0] - 1])) <= (
        tiles.tolerance(legend)
    )


def test_a_depth_of_half_a_metre_to_a_metre_is_never_read_as_under_half_a_metre():
    # Before: with a tolerance of 24 #F8E1A6 (0.5-1 m) read as "under 0.5 m", level 2.
    tile, outline = inside_tile()
    reading = tiles.read_tiles(legends.LEGENDS[FLOOD], outline, [(tile, filled(rgb("#F8E1A6")))])
    answer = {"counts": reading.counts, "rects": []}
    row = readings.read_zones({"flood_zones": [answer]})
    assert row["worst"] == "0.5-1" and analysis.level_of(row["index"]) == 3


@pytest.mark.parametrize("path", [FLOOD, DEBRIS])
def test_an_edge_at_partial_alpha_counts_in_its_class(path):
    zone = legends.zones_of(legends.LEGENDS[path])[1]
    straight = tiles.decode(filled(zone.rgb, alpha=60), legends.LEGENDS[path])
    faded = tiles.decode(filled(tuple(c * 60 // 255 for c in zone.rgb), 60), legends.LEGENDS[path])
    index = legends.LEGENDS[path].index(zone) + 1
    assert (straight == index).all() and (faded == index).all()


def test_a_planned_zone_with_its_dashed_border_reads_as_planned_and_nothing_unknown():
    tile, outline = inside_tile()
    legend = legends.LEGENDS[SLOPE]
    reading = tiles.read_tiles(legend, outline, [(tile, planned_zone(rgb("#FB5333")))])
    assert reading.counts[tiles.UNRECOGNISED] == 0 and not reading.unreadable()
    assert reading.counts["steep_slope_planned_border"] > 0
    assert reading.counts["steep_slope_planned_special"] > 120 * 120
    row = readings.read_zones({"steep_slope_zones": [{"counts": reading.counts, "rects": []}]})
    # Planned special warning: one level below a designated one, and said so.
    assert row["worst"] == "steep_slope_planned_special"
    assert analysis.level_of(row["index"]) == 4 and row["state"] == "zones"
    legend_rows = analysis.legend_of("landslide")
    planned = next(r for r in legend_rows if r["key"] == "steep_slope_planned_special")
    assert planned["planned"] and "指定予定" in planned["ja"] and "planned" in planned["en"]


def test_unknown_colours_are_counted_and_over_five_percent_make_the_layer_unreadable():
    tile, outline = inside_tile()
    legend = legends.LEGENDS[FLOOD]
    pixels = np.zeros((SIZE, SIZE, 4), dtype=np.uint8)
    pixels[:, :128] = (*rgb("#FFB7B7"), 255)
    pixels[:, 128:136] = (0x00, 0x80, 0x00, 255)  # 8 columns of green: 5.9 % of the paint
    reading = tiles.read_tiles(legend, outline, [(tile, encode(pixels))])
    assert reading.counts[tiles.UNRECOGNISED] == 8 * SIZE
    assert reading.unreadable() and reading.unknown == {"#008000FF": 8 * SIZE}
    pixels[:, 132:136] = 0  # 4 columns: 3 %, read
    assert not tiles.read_tiles(legend, outline, [(tile, encode(pixels))]).unreadable()


def mix(a: str, b: str, t: float = 0.5) -> tuple[int, int, int]:
    return tuple(round(x + t * (y - x)) for x, y in zip(rgb(a), rgb(b), strict=True))


@pytest.mark.parametrize(
    ("rgba", "path", "edge"),
    [
        ((*mix("#FFB7B7", "#FF9191"), 255), FLOOD, True),  # between 3-5 m and 5-10 m
        ((*mix("#FFB7B7", "#FF9191", 0.2), 255), FLOOD, True),
        ((*(c * 128 // 255 for c in mix("#FFD8C0", "#FFB7B7")), 128), FLOOD, True),  # faded
        ((*mix("#FA2800", "#1E3C8C"), 255), SLOPE, True),  # a fill under a border's dash
        ((0x00, 0x80, 0x00, 255), FLOOD, False),  # green: no blend of the depth legend
        ((0x80, 0x80, 0x80, 255), FLOOD, False),
        ((0x00, 0xFF, 0xFF, 255), SLOPE, False),
    ],
)
def test_an_edge_is_a_blend_of_two_legend_colours(rgba, path, edge):
    assert tiles.is_edge(rgba, legends.LEGENDS[path]) is edge


def three_to_five_with(columns: slice, colour: tuple[int, ...]) -> bytes:
    pixels = np.zeros((SIZE, SIZE, 4), dtype=np.uint8)
    pixels[:, :128] = (*rgb("#FFB7B7"), 255)  # 3-5 m: level 4
    pixels[:, columns] = colour
    return encode(pixels)


def flood_row(png: bytes) -> tuple[tiles.Reading, dict]:
    tile, outline = inside_tile()
    reading = tiles.read_tiles(legends.LEGENDS[FLOOD], outline, [(tile, png)])
    answer = {"counts": reading.counts, "rects": [], "stray": reading.stray}
    return reading, readings.read_zones({"flood_zones": [answer]})


def test_a_few_stray_colours_make_the_layer_uncertain_never_a_lower_level():
    # 4 columns of a colour of no class (3 % of the paint, under the 5 % that fails the
    # layer): before, ignored. Alone they leave the layer with no level (it could be any);
    # beside a known class that class's level stands as the least it can be, never less.
    stray = (0x00, 0x80, 0x00, 255)
    reading, row = flood_row(three_to_five_with(slice(128, 132), stray))
    assert not reading.unreadable() and reading.stray == {"#008000FF": 4 * SIZE}
    assert row["state"] == analysis.ZONES and row["stray"] and row["worst"] == "3-5"
    pixels = np.zeros((SIZE, SIZE, 4), dtype=np.uint8)
    pixels[:, 128:132] = stray  # the stray colour alone
    alone = flood_row(encode(pixels))[1]
    assert alone["state"] == analysis.UNCERTAIN and alone["index"] is None
    others = [{"key": layer.key, "index": 0.3, "numbers": {}} for layer in analysis.LAYERS[1:]]
    for lang, said, floor, sentence in (
        (
            "en",
            "Uncertain: the tiles hold colours not in the legend",
            "(at least: colours not in the legend",
            "The level of flood",
        ),
        (
            "ja",
            "判定できません：凡例にない色があり",
            "（以上：凡例にない色があり",
            "洪水は凡例にない色があるため",
        ),
    ):
        report = analysis.describe(
            resolve_place("千代田区"), lang, [{"key": "flood", **row}, *others]
        )
        flood = report["layers"][0]
        assert flood["level"] == 4 and floor in flood["label"] and report["level"] == 4
        assert report["zones_found"] and sentence not in report["narrative"]
        report = analysis.describe(
            resolve_place("千代田区"), lang, [{"key": "flood", **alone}, *others]
        )
        flood = report["layers"][0]
        assert flood["level"] is None and flood["label"].startswith(said)
        assert sentence in report["narrative"] and report["level"] == 2
        assert report["zones_found"]  # never "no designated zone was found" beside it


def test_an_uncertain_detail_is_never_said_to_hide_a_higher_score():
    # Flood duration is shown and never weighed: colours not in its legend leave it
    # uncertain, but cannot make the score higher, so the narrative does not say so.
    pixels = np.zeros((SIZE, SIZE, 4), dtype=np.uint8)
    pixels[:, 128:132] = (0x00, 0x80, 0x00, 255)
    alone = flood_row(encode(pixels))[1]
    scored = [
        {"key": layer.key, **alone}
        if layer.key in ("flood", "flood_duration")
        else {"key": layer.key, "index": 0.3, "numbers": {}}
        for layer in analysis.LAYERS
    ]
    for lang, flood_said, duration_said in (
        ("en", "The level of flood could", "of flood duration"),
        ("ja", "洪水は凡例にない色", "浸水継続時間は凡例"),
    ):
        narrative = analysis.describe(resolve_place("千代田区"), lang, scored)["narrative"]
        assert flood_said in narrative and duration_said not in narrative


def test_tiles_off_an_unconfirmed_legend_leave_the_layer_uncertain_however_few_colours():
    # Storm surge's legend is third parties' word (portal.UNCONFIRMED): its tiles read off
    # it are an answer the layer cannot give, not a broken portal. Three pixels of one
    # colour, all there is painted, would be under the floor of stray pixels (NOISE_PIXELS)
    # and read "no zone" without the work's flag that the legend did not fit.
    assert "storm_surge_zones" in portal.UNCONFIRMED and "flood_zones" not in portal.UNCONFIRMED
    surge = "03_hightide_l2_shinsuishin_data"
    counts = {zone.key: 0 for zone in legends.LEGENDS[surge]} | {"none": 97, "other": 3}
    off = {"path": surge, "share": 1.0, "colours": {"#123456FF": 3}}
    answer = {"counts": counts, "rects": [], "stray": {"#123456FF": 3}, "unreadable": off}
    row = readings.read_zones({"storm_surge_zones": [answer]})
    assert (row["state"], row["index"]) == (analysis.UNCERTAIN, None)
    assert row["unreadable"] == {"storm_surge_zones": off}
    flagless = {k: v for k, v in answer.items() if k != "unreadable"}
    assert readings.read_zones({"storm_surge_zones": [flagless]})["state"] == analysis.NO_ZONE
    # Beside a known class, that class's level stands as the least it can be, never less.
    counts["3-5"] = 40
    row = readings.read_zones({"storm_surge_zones": [answer]})
    assert row["state"] == analysis.ZONES and analysis.level_of(row["index"]) == 4
    assert row["stray"] == {"storm_surge_zones": {"#123456FF": 3}}
    # The report says why, in both languages, beside the layer.
    (note,) = analysis.off_legend_notes(row["unreadable"])
    assert surge in note["en"] and "never read as a lower level" in note["en"]
    assert "低いレベルとはしません" in note["ja"] and note["date"]


def test_an_anti_aliased_edge_between_two_classes_leaves_the_layer_certain():
    pixels = np.zeros((SIZE, SIZE, 4), dtype=np.uint8)
    pixels[:, :128] = (*rgb("#FFB7B7"), 255)
    pixels[:, 128] = (*mix("#FFB7B7", "#FF9191"), 255)  # the blended seam
    pixels[:, 129:] = (*rgb("#FF9191"), 255)
    pixels[0, 200] = (*mix("#FFB7B7", "#FF9191"), 255)  # alone: not beside another class
    pixels[0, 199] = pixels[0, 201] = pixels[1, 200] = 0
    reading, row = flood_row(encode(pixels))
    assert reading.counts[tiles.UNRECOGNISED] == SIZE + 1
    assert sum(reading.stray.values()) == 1 and row["state"] == analysis.ZONES
    assert row["worst"] == "5-10" and analysis.level_of(row["index"]) == 5


def test_two_prefectures_tiles_of_one_place_merge_worst_first():
    legend = legends.LEGENDS[SLIDE]
    index = {zone.key: i for i, zone in enumerate(legend, start=1)}
    warning, special = index["landslide_warning"], index["landslide_special"]
    a = np.array([[0, warning, special, -1]], dtype=np.int8)
    b = np.array([[warning, special, 0, 0]], dtype=np.int8)
    assert tiles.merge(a, b, legend).tolist() == [[warning, special, special, -1]]


# --- which tiles, for which place ------------------------------------------------------------


def test_landslide_keys_are_per_prefecture_and_flood_keys_are_national():
    area = resolve_place("千代田区")
    plan = zones.plan(area)
    assert plan.prefectures == ("13",)
    keys = zones.dataset_keys(area, "debris_flow_zones")
    assert keys == [f"13/{key}" for key in plan.keys]
    assert zones.dataset_keys(area, "flood_zones") == plan.keys
    assert split_key(keys[0]) == ("13", plan.keys[0])
    with pytest.raises(ValueError):
        split_key("48/12/3638/1612")


def test_inland_flooding_keys_are_per_prefecture_and_storm_surge_keys_are_national():
    area = resolve_place("千代田区")
    plan = zones.plan(area)
    assert zones.dataset_keys(area, "inland_flood_zones") == [f"13/{key}" for key in plan.keys]
    assert zones.dataset_keys(area, "storm_surge_zones") == plan.keys
    assert ZONE_DATASETS["inland_flood_zones"] == INLAND
    assert ZONE_DATASETS["storm_surge_zones"] == SURGE


def test_a_point_straddling_two_prefectures_reads_both():
    # On the Tama river, between 東京都大田区 and 神奈川県川崎市.
    area = resolve_place("35.5517, 139.7008")
    plan = zones.plan(area)
    assert set(plan.prefectures) == {"13", "14"} and plan.prefectures[0] == area.code[:2]
    keys = zones.dataset_keys(area, "landslide_zones")
    assert len(keys) == 2 * len(plan.keys)
    assert {split_key(key)[0] for key in keys} == {"13", "14"}


def test_a_coastal_points_circle_is_land_only():
    # 白浜町 (Wakayama), on the shore: most of a 500 m circle around it is sea.
    area = resolve_place("33.6934, 135.3350")
    whole = outlines.circle(area.lat, area.lon, area.radius_m)
    land = outlines.outline_of(area)
    assert land.kind == "circle" and land.note == "point, land only"
    assert 0.1 < land.geometry.area / whole.area < 0.6
    inland = outlines.outline_of(resolve_place("35.6812, 139.7671"))
    assert inland.note == "point"


def test_the_exact_tile_count_decides_the_zoom_for_scattered_islands():
    # 小笠原村: islands across a box of thousands of empty tiles. Before: z9.
    outline = outlines.outline_of(resolve_place("小笠原村")).geometry
    zoom = tiles.zoom_for(outline, 64)
    assert len(tiles.covering(outline, zoom)) <= 64 < len(tiles.covering(outline, zoom + 1))
    assert zoom >= 12


# --- the probe's judgement of a sample tile ----------------------------------------------------


@pytest.mark.parametrize(
    ("status", "png", "verdict"),
    [
        (404, None, "missing (HTTP 404)"),
        (200, filled((0, 0, 0), alpha=0), "all transparent"),
        (200, filled((0, 0x80, 0)), "colours not in the published legend"),
    ],
)
def test_a_sample_that_is_missing_transparent_or_off_legend_is_not_available(status, png, verdict):
    result = judge("flood_zones", "12/3638/1612", status, png)
    assert result["ok"] is False and verdict in result["verdict"]


def test_a_painted_sample_is_available_with_its_shares():
    pixels = np.zeros((SIZE, SIZE, 4), dtype=np.uint8)
    pixels[:64] = (*rgb("#A50021"), 255)
    result = judge("debris_flow_zones", "13/8/226/102", 200, encode(pixels))
    assert result["ok"] and result["painted"] == 0.25 and result["unknown"] == 0.0
    assert result["path"] == ZONE_DATASETS["debris_flow_zones"]


# --- how the report words levels, states and small shares ---------------------------------------


def rows(landslide_share: float) -> list[dict]:
    """Stored layer rows: flood found nothing, tsunami is not published, landslide maybe."""
    found = landslide_share > 0
    return [
        {"key": "flood", "state": "no_zone", "index": None, "numbers": {}, "shares": {}},
        {
            "key": "tsunami",
            "state": "not_published",
            "reason": "islands only",
            "reason_ja": "島しょ部のみ",
            "index": None,
            "numbers": {},
            "shares": {},
        },
        {
            "key": "liquefaction",
            "state": "read",
            "index": readings.index_of(3),
            "numbers": {"moderate_or_high_share": 0.3},
        },
        {
            "key": "landslide",
            "state": "zones" if found else "no_zone",
            "index": readings.index_of(3) if found else None,
            "numbers": {"worst_class_share": landslide_share} if found else {},
            "worst": "landslide_warning" if found else None,
        },
        {
            "key": "seismic",
            "state": "read",
            "index": readings.index_of(2),
            "numbers": {"shaking_prob_30y": 0.02},
        },
    ]


NO_ZONE_JA = "指定区域は見つかりませんでした（安全とは限りません。データが未整備の場合があります）"
NO_ZONE_EN = "No designated zone found (not necessarily safe: the data may not be prepared)"


@pytest.mark.parametrize(
    ("lang", "tiny", "no_zone", "not_published"),
    [
        ("ja", "0.1 %未満", NO_ZONE_JA, "この都道府県の公開データはありません"),
        ("en", "under 0.1 %", NO_ZONE_EN, "Not published for this prefecture"),
    ],
)
def test_layers_without_a_level_say_why_and_never_very_low(app, lang, tiny, no_zone, not_published):
    from flask import render_template

    area = resolve_place("千代田区")
    described = analysis.describe(area, lang, rows(0.0003))
    levels = {row["key"]: row["level"] for row in described["layers"]}
    assert levels == {
        "flood": None,
        "tsunami": None,
        "liquefaction": 3,
        "landslide": 3,
        "seismic": 2,
    }
    # Only layers with a level count: the headline is level 3, not dragged by "no zone".
    assert described["level"] == 3 and set(described["worst"]) == {"liquefaction", "landslide"}
    assert described["least"] == ["seismic"] and described["zones_found"] is True
    report = {
        "area": area.to_dict(),
        "lang": lang,
        "provider": "demo",
        "generated_at": "2026-12-01T00:00:00+00:00",
        **described,
    }
    with app.test_request_context():
        html = render_template("partials/_report.html", report=report)
    assert 'data-layer="flood" data-state="no_zone"' in html and no_zone in html
    assert 'data-layer="tsunami" data-state="not_published"' in html and not_published in html
    # Never "very low": no layer, and no bar, at level 1.
    assert 'class="report-level-1"' not in html and "report-level-1 " not in html
    assert html.count('class="report-bar report-level-none"') == 2
    # The landslide share that decides its level is 0.03 %: said as under 0.1 %, not 0.0 %.
    assert f'<span class="report-figure-value">{tiny}</span>' in html


def test_with_no_zone_found_anywhere_the_headline_says_so(app):
    from flask import render_template

    area = resolve_place("千代田区")
    for lang, words in (
        ("en", "No designated zone"),
        ("ja", "指定区域（洪水・津波・土砂災害）は見つかりませんでした"),
    ):
        described = analysis.describe(area, lang, rows(0.0))
        assert described["zones_found"] is False and words in described["narrative"]
        assert described["level"] == 3  # liquefaction's: the zone layers have none
        report = {"area": area.to_dict(), "lang": lang, "provider": "demo",
                  "generated_at": "2026-12-01T00:00:00+00:00", **described}  # fmt: skip
        with app.test_request_context():
            html = render_template("partials/_report.html", report=report)
        assert 'data-zones-found="no"' in html


# --- the landslide data's terms and credit --------------------------------------------------------


def test_every_prefecture_has_its_landslide_terms_and_the_required_statements():
    from app.assessment.report import provenance
    from app.assessment.sources import terms

    uses = [row["commercial_use"] for row in terms.table().values()]
    assert len(uses) == 47 and uses.count("permitted") == 41 and uses.count("forbidden") == 1
    conditional = sorted(
        code for code, row in terms.table().items() if row["commercial_use"] != "permitted"
    )
    assert conditional == ["14", "26", "30", "31", "34", "42"]
    assert all("A33_permision_R7.xlsx" in row["source"] for row in terms.table().values())
    sources = {"landslide_zones": {"real": True}, "flood_zones": {"real": True}}
    for place, statement in (
        ("和歌山市", "原典資料提供元の和歌山県が有しているデータを加工したものです。"),
        ("広島市", "土砂災害ポータルひろしまおよび広島県Dobox"),
        ("長崎市", "出典：長崎県、国土数値情報（CC BY 4.0）"),
        ("札幌市", ""),
    ):
        prov = provenance.describe(sources, resolve_place(place))
        assert statement in prov["landslide_terms"]["statement_ja"]
        credits = " ".join(s["credit_ja"] for s in prov["services"])
        assert "「国土数値情報（令和７年度土砂災害警戒区域）」をもとに国土地理院が加工" in credits
        # The report speaks of the data, never of how this table was made.
        assert "未確認" not in str(prov) and "internet" not in str(prov)
