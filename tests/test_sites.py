"""Where to go: the nearest designated emergency evacuation sites for each hazard present.

GSI's site tiles are constructed here to the format public projects record (GeoJSON points
with "name" and "address", one tile set per hazard type at zoom 10: docs/providers.md), with
sites placed at known metres from the spot, so their distances and directions are known.
"""

import json
import math
import re

import mercantile
import pytest

from app.assessment import resolve_place
from app.assessment.grid import locate
from app.assessment.report import sites
from app.assessment.report.analysis import LAYERS, legend_of
from app.assessment.sources import evacuation
from app.assessment.sources.providers import make_provider
from tests.conftest import job_id_from, serve_http, signed_in
from tests.test_jobs import attr, poll_until, settled
from tests.test_latin_walk import latin_words
from tests.test_spot import SPOT, Stand, point_report, real

# Sites in metres (east, north) of SPOT, per GSI hazard type: flood and earthquake sites.
PLACED = {
    1: [("第一小学校", 300, 400), ("河川敷の高台", -1200, 0), ("遠くの公園", 0, 5000)],
    4: [("中央公園", 0, -150), ("第一小学校", 300, 400), ("市民体育館", 700, 700),
        ("北の広場", 0, 900)],
}  # fmt: skip


def lonlat(east: float, north: float) -> tuple[float, float]:
    lat = SPOT[0] + north / locate.EARTH_M_PER_DEGREE
    lon = SPOT[1] + east / (locate.EARTH_M_PER_DEGREE * math.cos(math.radians(SPOT[0])))
    return lon, lat


def site_tile(code: int, key: str) -> bytes | None:
    """A constructed site tile: the PLACED sites of the type that fall in it, else None."""
    z, x, y = (int(v) for v in key.split("/"))
    west, south, east, north = mercantile.bounds(x, y, z)
    features = []
    for name, e, n in PLACED.get(code, []):
        lon, lat = lonlat(e, n)
        if west <= lon < east and south <= lat < north:
            features.append(
                {
                    "type": "Feature",
                    "geometry": {"type": "Point", "coordinates": [lon, lat]},
                    "properties": {"name": name, "address": "横浜市西区", f"disaster{code}": 1},
                }
            )
    if not features:
        return None
    return json.dumps({"type": "FeatureCollection", "features": features}).encode()


class SiteStand(Stand):
    """The portal, J-SHIS and GSI's pale map as in test_spot, and GSI's site tiles."""

    def __init__(self, placed: bool = True) -> None:
        super().__init__()
        self.placed = placed

    def respond(self, path: str):
        if path.startswith("/gsi/skhb"):
            self.hits.append(path)
            code, key = path.removeprefix("/gsi/skhb").removesuffix(".geojson").split("/", 1)
            body = site_tile(int(code), key) if self.placed else None
            if body is None:
                return 404, b"Not Found", {}
            modified = {"Last-Modified": "Tue, 01 Sep 2026 00:00:00 GMT"}
            return 200, body, {"Content-Type": "application/geo+json", **modified}
        return super().respond(path)


@pytest.fixture
def stand():
    with serve_http(SiteStand()) as state:
        yield state


@pytest.fixture
def bare():
    """A stand whose site tiles are all missing: no site of any type registered here."""
    with serve_http(SiteStand(placed=False)) as state:
        yield state


def with_sites(stand: Stand) -> dict:
    return {**real(stand), "EVACUATION_SITES_URL": stand.url + "/gsi"}


# --- pure: the hazard each layer's sites are designated for, distance, direction ----------


@pytest.mark.parametrize(
    ("key", "state", "code"),
    [
        ("flood", "zones", 1),
        ("house_collapse", "zones", 1),
        ("flood_duration", "shown", 1),
        ("flood_planned", "shown", 1),
        ("landslide", "zones", 2),
        ("storm_surge", "zones", 3),
        ("tsunami", "uncertain", 5),  # the zone may be there: its sites are listed
        ("inland_flood", "zones", 7),
        ("seismic", "read", 4),  # every place in Japan shakes
        ("liquefaction", "read", 4),
        ("flood", "no_zone", None),
        ("tsunami", "not_published", None),
        ("landslide", "omitted", None),
        ("liquefaction", "no_data", None),
    ],
)
def test_each_hazard_present_asks_for_the_sites_designated_for_it(key, state, code) -> None:
    found = sites.present([{"key": key, "state": state, "index": 0.5}])
    assert found == ({code: [key]} if code else {})


def test_hazards_are_listed_once_in_report_order_with_every_layer_that_found_them() -> None:
    rows = [{"key": layer.key, "state": "read" if layer.key in ("seismic", "liquefaction")
             else "zones", "index": 0.5} for layer in LAYERS]  # fmt: skip
    found = sites.present(rows)
    assert list(found) == [1, 5, 3, 7, 4, 2]
    assert found[1] == ["flood", "flood_planned", "house_collapse", "flood_duration"]
    assert found[4] == ["liquefaction", "seismic"]


def test_the_nearest_sites_come_nearest_first_with_distance_and_direction() -> None:
    placed = [[*lonlat(e, n), name, ""] for name, e, n in PLACED[4]]
    found = sites.nearest(*SPOT, placed, reach=2500)
    assert [(s["name"], s["metres"], s["direction"]) for s in found] == [
        ("中央公園", 150, "S"),
        ("第一小学校", 500, "NE"),  # 300 m east and 400 m north: 500 m, bearing 37
        ("北の広場", 900, "N"),  # nearer than the gymnasium's 990 m: three listed, no more
    ]
    assert found[1]["bearing"] == 37


def test_a_site_beyond_reach_is_not_listed_and_a_site_in_two_tiles_counts_once() -> None:
    placed = [[*lonlat(e, n), name, ""] for name, e, n in PLACED[1]]
    found = sites.nearest(*SPOT, placed + placed[:1], reach=2500)
    assert [s["name"] for s in found] == ["第一小学校", "河川敷の高台"]  # 5 km out: not listed
    assert found[1]["metres"] == 1200 and found[1]["direction"] == "W"
    assert sites.nearest(*SPOT, [], reach=2500) == []


@pytest.mark.parametrize(
    ("xy", "drawn", "inside"),
    [
        ((600, 300), [600, 300], True),
        ((2500, 500), [964, 500], False),  # due east off the map: at the east edge
        ((-500, -500), [36, 36], False),  # north-west: at the corner, on the line from the pin
        ((500, 1750), [500, 964], False),
    ],
)
def test_a_site_off_the_map_is_drawn_at_its_edge_towards_it(xy, drawn, inside) -> None:
    assert sites.on_map([500, 500], xy, 1000, 1000) == (drawn, inside)


def test_a_site_tile_is_read_as_points_with_their_names() -> None:
    body = json.dumps(
        {
            "type": "FeatureCollection",
            "features": [
                {
                    "type": "Feature",
                    "geometry": {"type": "Point", "coordinates": [139.6, 35.4]},
                    "properties": {"name": "中央公園", "address": "横浜市西区", "disaster4": 1},
                },
                {
                    "type": "Feature",
                    "geometry": {"type": "Point", "coordinates": [139.7, 35.5]},
                    "properties": {"施設・場所名": "市民体育館", "住所": "横浜市中区"},
                },
                {
                    "type": "Feature",
                    "geometry": {"type": "LineString", "coordinates": [[0, 0]]},
                    "properties": {"name": "道"},
                },
            ],
        }  # fmt: skip
    ).encode()
    assert evacuation.parse_tile(body) == [
        [139.6, 35.4, "中央公園", "横浜市西区"],
        [139.7, 35.5, "市民体育館", "横浜市中区"],
    ]
    for bad in (b"<html>", b"[]", b'{"type": "Feature"}'):
        with pytest.raises(ValueError):
            evacuation.parse_tile(bad)
    # Features of any other shape are skipped, never an error that would fail a paid job.
    odd = {"features": [None, 7, "x", [1], {"geometry": 3}, {"geometry": {"type": "Point",
           "coordinates": [139.6, 35.4]}, "properties": ["not", "an", "object"]}]}  # fmt: skip
    assert evacuation.parse_tile(json.dumps(odd).encode()) == [[139.6, 35.4, "", ""]]


def test_the_tiles_asked_hold_every_point_within_reach() -> None:
    keys = evacuation.tile_keys(*SPOT, 2500)
    assert keys and all(key.startswith("10/") for key in keys)
    for e, n in ((2400, 0), (-2400, 0), (0, 2400), (0, -2400)):
        lon, lat = lonlat(e, n)
        assert mercantile.tile(lon, lat, 10) in {
            mercantile.Tile(*(int(v) for v in key.split("/")[1:]), 10) for key in keys
        }


def test_sites_undated_by_gsi_say_the_day_their_oldest_tile_was_read() -> None:
    # A tile from the layer cache may have been read days before the report it serves.
    gsi = evacuation.GsiSites("http://gsi.invalid", None)
    older = {"sites": [], "date": "", "read": "2026-11-30"}
    newer = {"sites": [[139.0, 35.0, "公園", ""]], "date": "", "read": "2026-12-02"}
    said = gsi.source([newer, older])
    assert (said["date"], said["dated_by"]) == ("2026-11-30", "read")
    dated = gsi.source([newer, {**older, "date": "2026-09-01"}])
    assert (dated["date"], dated["dated_by"]) == ("2026-09-01", "modified")


def test_the_demo_s_sites_are_constructed_the_same_every_time_inside_their_tile() -> None:
    key = "10/{}/{}".format(*mercantile.tile(SPOT[1], SPOT[0], 10)[:2])
    built = evacuation.constructed(4, key)
    assert built and built == evacuation.constructed(4, key)
    west, south, east, north = mercantile.bounds(*(int(v) for v in key.split("/")[1:]), 10)
    assert all(west <= lon < east and south <= lat < north for lon, lat, _, _ in built)
    assert all(name.startswith("（デモ）地震の避難場所") for _, _, name, _ in built)
    assert evacuation.constructed(8, key) == []  # the demo holds no volcano site here
    # Only on land: none out in the Pacific, and none in Tokyo Bay off Yokohama's shore.
    assert evacuation.constructed(4, "10/{}/{}".format(*mercantile.tile(142.0, 33.0, 10)[:2])) == []
    bay, spot = [139.75, 35.45, "", ""], [SPOT[1], SPOT[0], "", ""]  # 10 km east: the bay
    assert evacuation.on_land([bay, spot], (139.6, 35.4, 139.8, 35.5)) == [False, True]


# --- a point report, end to end ----------------------------------------------------------------


def hazard(report: dict, code: int) -> dict:
    return next(h for h in report["evacuation"]["hazards"] if h["code"] == code)


def test_a_real_point_report_lists_the_nearest_sites_per_hazard_present(stand) -> None:
    report = point_report(make_provider(with_sites(stand)))
    section = report["evacuation"]
    assert section["reach_m"] == 2500  # the 500 m circle and a 2 km margin
    # Flood zones at the spot and a steep-slope zone in the circle (test_spot's tiles), and
    # shaking everywhere; no tsunami zone here. No landslide site is registered near.
    assert [h["code"] for h in section["hazards"]] == [1, 4, 2]
    assert hazard(report, 2)["state"] == "none_near" and hazard(report, 2)["sites"] == []
    flood = hazard(report, 1)
    # The planned scale's zones (test_spot's tiles paint them too) are flood's as well.
    assert flood["state"] == "sites" and flood["layers"] == ["flood", "flood_planned"]
    assert [(s["name"], s["metres"], s["direction"]) for s in flood["sites"]] == [
        ("第一小学校", 500, "NE"),
        ("河川敷の高台", 1200, "W"),
    ]
    quake = hazard(report, 4)
    assert [s["name"] for s in quake["sites"]] == ["中央公園", "第一小学校", "北の広場"]
    # On the map: the park 150 m south of the pin (the 500 m circle is 1000 units wide).
    park = quake["sites"][0]
    assert park["on_map"] is True and park["xy"][0] == pytest.approx(500, abs=1)
    assert park["xy"][1] == pytest.approx(650, abs=2)
    assert flood["sites"][1]["on_map"] is False  # 1.2 km west: at the map's western edge
    assert section["source"] == {**evacuation.CREDIT, "real": True, "date": "2026-09-01",
                                 "dated_by": "modified"}  # fmt: skip
    # Only the types present are asked, each tile once; a second report asks nothing again.
    assert {hit.split("/")[2] for hit in stand.hits if hit.startswith("/gsi/")} == {
        "skhb01",
        "skhb02",
        "skhb04",
    }
    asked = stand.count("/gsi/")
    assert asked == 3 * len(evacuation.tile_keys(*SPOT, 2500))
    from app.caches.singleflight import SingleFlightCache

    cache = SingleFlightCache(maxsize=4096)
    point_report(make_provider(with_sites(stand)), cache)
    before = stand.count("/gsi/")
    point_report(make_provider(with_sites(stand)), cache)
    assert stand.count("/gsi/") == before


def test_the_report_page_lists_the_sites_and_marks_them_on_the_map(make_app, stand) -> None:
    app, client, actions = signed_in(make_app, **with_sites(stand))
    job_id = job_id_from(actions.submit(f"{SPOT[0]},{SPOT[1]}", lang="ja"))
    assert attr(poll_until(client, job_id, settled), "data-status") == "succeeded"
    page = client.get(f"/assessments/{job_id}?lang=ja").get_data(as_text=True)
    block = page[page.index('<section class="report-sites"') :]
    block = block[: block.index("</section>")]
    text = re.sub(r"\s+", "", re.sub(r"<[^>]+>", "", block))
    flood = "洪水（洪水・洪水（計画規模））："
    assert flood + "1.第一小学校（北東へ約500m）、2.河川敷の高台（西へ約1.2km）" in text
    assert "地震（液状化・地震の揺れ）：1.中央公園（南へ約150m）" in text
    assert "市町村の避難計画ではありません" in text
    assert (
        "出典：「指定緊急避難場所データ」（国土地理院）"
        "（https://www.gsi.go.jp/bousaichiri/hinanbasho.html）を加工して作成" in text
    )
    assert "データの更新日2026-09-01" in text
    assert latin_words(block) == []
    # The flood map carries the flood sites beside the pin; the shaking map the quake sites.
    flood_map = page[page.index('<figure class="report-map" data-layer="flood"') :]
    flood_map = flood_map[: flood_map.index("</figure>")]
    assert flood_map.count('class="report-site"') == 2
    assert 'data-site="2" data-on-map="edge"' in flood_map
    seismic_map = page[page.index('<figure class="report-map" data-layer="seismic"') :]
    seismic_map = seismic_map[: seismic_map.index("</figure>")]
    assert seismic_map.count('class="report-site"') == 3
    tsunami_map = page[page.index('<figure class="report-map" data-layer="tsunami"') :]
    assert 'class="report-site"' not in tsunami_map[: tsunami_map.index("</figure>")]
    english = client.get(f"/assessments/{job_id}?lang=en").get_data(as_text=True)
    assert '1. <span lang="ja">第一小学校</span> (about 500 m north-east)' in english
    assert "<strong>Earthquake</strong> (liquefaction, earthquake shaking): " in english
    assert "<strong>Flood</strong> (flood, flood (planned scale)): " in english
    assert "This is not the municipality's evacuation plan" in english


def test_a_demo_point_report_lists_constructed_sites_for_its_zones(make_app) -> None:
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=0)
    job_id = job_id_from(actions.submit(f"{SPOT[0]},{SPOT[1]}", lang="en"))
    assert attr(poll_until(client, job_id, settled), "data-status") == "succeeded"
    report = client.get(f"/assessments/{job_id}/report.json").get_json()
    with_zones = [row["key"] for row in report["layers"] if row["state"] == "zones"]
    assert with_zones  # the demo paints zones here (its tsunami zones, by the sea)
    codes = {sites.LAYER_HAZARD[key] for key in with_zones} | {4}
    assert {h["code"] for h in report["evacuation"]["hazards"]} == codes
    assert report["evacuation"]["source"] == {"real": False}
    for h in report["evacuation"]["hazards"]:
        assert h["state"] == "sites", h
        assert all(s["name"].startswith("（デモ）") for s in h["sites"])
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert 'data-sites-source="demo"' in page and "sites constructed for the demo" in page
    key = with_zones[0]
    figure = page[page.index(f'<figure class="report-map" data-layer="{key}"') :]
    assert 'class="report-site"' in figure[: figure.index("</figure>")]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_no_site_data_is_said_as_such_never_as_none_needed(make_app, bare, lang) -> None:
    app, client, actions = signed_in(make_app, **with_sites(bare))
    job_id = job_id_from(actions.submit(f"{SPOT[0]},{SPOT[1]}", lang=lang))
    assert attr(poll_until(client, job_id, settled), "data-status") == "succeeded"
    report = client.get(f"/assessments/{job_id}/report.json").get_json()
    assert {h["state"] for h in report["evacuation"]["hazards"]} == {"no_data"}
    page = client.get(f"/assessments/{job_id}?lang={lang}").get_data(as_text=True)
    said = page[page.index('data-sites-state="no_data">') :].removeprefix(
        'data-sites-state="no_data">'
    )
    if lang == "ja":
        assert said.startswith("この付近の避難場所のデータはありません（市町村が国土地理院に登録")
        assert "避難場所が不要という意味ではありません" in said
    else:
        assert said.startswith(
            "No site data here (the municipality may not have registered its sites with GSI)."
        )
        assert "That does not mean none is needed" in said
    assert 'class="report-site"' not in page


def test_sites_that_cannot_be_read_leave_the_report_and_say_so(make_app, stand) -> None:
    respond, down = stand.respond, []
    stand.respond = lambda path: (
        (down.append(path) or (503, b"", {})) if path.startswith("/gsi/") else respond(path)
    )
    app, client, actions = signed_in(make_app, **with_sites(stand), LAYER_HTTP_RETRIES=0)
    job_id = job_id_from(actions.submit(f"{SPOT[0]},{SPOT[1]}", lang="en"))
    assert attr(poll_until(client, job_id, settled), "data-status") == "succeeded"
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert 'data-sites-state="unavailable"' in page
    assert "The site data could not be read when this report was made" in page
    # A service that is down is asked once, beside the layers: the report does not wait on
    # it again after them (the first tile failed, and nothing more was asked).
    assert len(down) == 1


def test_a_report_stored_before_sites_renders_without_them(app) -> None:
    from flask import render_template

    area = resolve_place(f"{SPOT[0]}, {SPOT[1]}")
    rows = [{"key": layer.key, "index": 0.5, "numbers": {}, "legend": legend_of(layer.key),
             "state": "read" if layer.key in ("seismic", "liquefaction") else "zones"}
            for layer in LAYERS]  # fmt: skip
    from app.assessment.report.analysis import describe

    for lang in ("en", "ja"):
        report = {"area": area.to_dict(), "lang": lang, "provider": "demo",
                  "generated_at": "2026-12-01T00:00:00+00:00",
                  **describe(area, lang, rows, spot=True)}  # fmt: skip
        with app.test_request_context():
            html = render_template("partials/_report.html", report=report)
        assert 'data-sites="not_part"' in html and "report-sites" not in html
        said = "この報告書の作成時には調べていません" if lang == "ja" else "were not part of this"
        assert said in html
        # A municipality's report has no spot: no section, no line.
        place = resolve_place("東京都中央区")
        report["area"] = place.to_dict()
        with app.test_request_context():
            html = render_template("partials/_report.html", report=report)
        assert "data-sites" not in html


def test_a_point_report_stored_before_sites_renders_from_the_database(make_app, sql) -> None:
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=0)
    job_id = job_id_from(actions.submit(f"{SPOT[0]},{SPOT[1]}", lang="ja"))
    assert attr(poll_until(client, job_id, settled), "data-status") == "succeeded"
    assert sql("UPDATE assessment_jobs SET result = result - 'evacuation' WHERE id = %(id)s",
               id=job_id) == 1  # fmt: skip
    for lang in ("ja", "en"):
        response = client.get(f"/assessments/{job_id}?lang={lang}")
        page = response.get_data(as_text=True)
        assert response.status_code == 200 and 'data-sites="not_part"' in page
        assert 'class="report-site"' not in page and "report-sites-list" not in page
    assert "evacuation" not in client.get(f"/assessments/{job_id}/report.json").get_json()
