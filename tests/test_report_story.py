"""One story per report: every number says whose it is, in both languages (issue 47).

A point's report is headed by its spot; the bars, the level table and the zones' shares are
the circle's worst, and say so with the circle's own radius. The history lists the headline
the report page shows.
"""

import re

import pytest
from flask import render_template

from app.assessment import resolve_place
from app.assessment.errors import PlaceAmbiguous
from app.assessment.report.analysis import translate
from app.assessment.sources.providers import make_provider
from app.assessment.work import run_assessment
from app.caches.singleflight import SingleFlightCache
from tests.conftest import job_id_from, signed_in
from tests.test_jobs import attr, poll_until, settled

YOKOHAMA = "35.4540, 139.6380"  # 横浜市中区: every layer read
TOKYO = "35.6812, 139.7671"  # 千代田区: Tokyo publishes no tsunami data outside the islands
FUKUOKA = "33.5902, 130.4017"  # 福岡市中央区: the spot at 40, its circle at 80


def demo_report(place: str) -> dict:
    demo = make_provider({"LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": 0})
    return run_assessment(
        resolve_place(place),
        "ja",
        provider=demo,
        cache=SingleFlightCache(maxsize=4096),
        progress=lambda step, percent: None,
    )


@pytest.fixture(scope="module")
def yokohama() -> dict:
    return demo_report(YOKOHAMA)


@pytest.fixture(scope="module")
def tokyo() -> dict:
    return demo_report(TOKYO)


def widened(report: dict, radius: float, lang: str) -> dict:
    """The same report as if placed at a 町丁目 read over a wider circle, in lang."""
    return translate({**report, "area": {**report["area"], "radius_m": radius}}, lang)


def rendered(app, report: dict) -> str:
    with app.test_request_context():
        return render_template("partials/_report.html", report=report)


def between(html: str, start: str, end: str) -> str:
    begin = html.index(start)
    return html[begin : html.index(end, begin)]


# --- 1. every number says whose it is ---------------------------------------------------------


@pytest.mark.parametrize(
    ("lang", "bars", "table", "shares"),
    [
        ("ja", "半径1380mの円", "半径1380mの円", "半径1380mの円"),
        ("en", "within the 1380 m circle", "within the 1380 m circle", "within the 1380 m circle"),
    ],
)
def test_the_bars_and_tables_say_they_are_the_circle_s_with_its_radius(
    app, yokohama, lang, bars, table, shares
):
    html = rendered(app, widened(yokohama, 1380, lang))
    assert bars in between(html, '<section class="report-layers"', "<svg")
    assert bars in between(html, '<title id="report-chart-title"', "</title>")
    assert table in between(html, '<table class="report-table">', "</caption>")
    assert shares in between(html, '<table class="report-table report-shares">', "</thead>")
    # The greatest-hazard line above the score is the spot's, and says so.
    spot = "この地点" if lang == "ja" else "at the spot"
    assert spot in between(html, '<p class="report-worst', "</p>")


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_a_municipality_s_bars_name_no_circle(app, lang):
    html = rendered(app, translate(demo_report("千代田区"), lang))
    bars = between(html, '<section class="report-layers"', "<svg")
    assert "半径" not in bars and "circle" not in bars


def test_the_history_shows_the_headline_the_report_page_shows(make_app, sql):
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=0)
    job_id = job_id_from(actions.submit(FUKUOKA, lang="ja"))
    assert attr(poll_until(client, job_id, settled), "data-status") == "succeeded"
    stored = sql("SELECT result FROM assessment_jobs")[0][0]
    assert stored["score"] != stored["circle"]["score"]  # the spot's and the circle's differ
    for lang in ("ja", "en"):
        with client.session_transaction() as session:
            session["lang"] = lang  # the interface's language, as the language menu sets it
        page = client.get(f"/assessments/{job_id}?lang={lang}").get_data(as_text=True)
        score = re.search(r'class="report-score-value">(\d+)<', page)[1]
        history = client.get("/assessments").get_data(as_text=True)
        cell = re.search(r'class="history-headline">(.*?)</td>', history, re.S)[1]
        assert f'data-score="{score}"' in cell, cell
        assert ("この地点" if lang == "ja" else "at the spot") in cell


# --- 2. the map caption's circle is the report's own ------------------------------------------


@pytest.mark.parametrize(
    ("lang", "said", "never"),
    [("ja", "地点から半径1380mの円", "500m"), ("en", "a 1380 m circle around the point", "500 m")],
)
def test_the_map_caption_gives_the_report_s_own_radius(app, yokohama, lang, said, never):
    html = rendered(app, widened(yokohama, 1380, lang))
    caption = between(html, '<p class="report-extent" data-extent="circle"', "</p>")
    assert said in caption and never not in caption


# --- 3. where a prefecture publishes nothing, the spot reads "no data" ------------------------


@pytest.mark.parametrize(
    ("lang", "no_data", "no_zone"),
    [("ja", "データなし", "区域の指定なし"), ("en", "No data", "No zone mapped")],
)
def test_an_unpublished_layer_reads_no_data_at_the_spot(app, tokyo, lang, no_data, no_zone):
    tsunami = next(row for row in tokyo["layers"] if row["key"] == "tsunami")
    assert tsunami["state"] == "not_published"
    html = rendered(app, translate(tokyo, lang))
    line = between(html, '<li data-layer="tsunami"', "</li>")
    assert no_data in line and no_zone not in line


def test_a_new_report_stores_no_data_for_an_unpublished_layer_at_the_spot(tokyo):
    tsunami = next(row for row in tokyo["layers"] if row["key"] == "tsunami")
    assert tsunami["at_point"]["key"] == "not_mapped"
    assert tsunami.get("real") is None  # nothing was read: neither real nor demonstration


# --- 4. shaking names its intensity ------------------------------------------------------------


@pytest.mark.parametrize(
    ("lang", "intensity"),
    [("ja", "震度6弱以上"), ("en", "JMA seismic intensity 6 lower or stronger")],
)
def test_shaking_says_which_intensity(app, yokohama, lang, intensity):
    html = rendered(app, translate(yokohama, lang))
    assert intensity in between(html, '<li data-figure="shaking_prob_30y"', "</li>")
    assert intensity in between(html, '<li data-layer="seismic"', "</li>")


# --- 5. the demo banner says "all" when all are ----------------------------------------------


@pytest.mark.parametrize(
    ("lang", "all_demo", "some"),
    [
        ("ja", "デモ用のデータから作成したもので", "一部の項目"),
        ("en", "Built from demonstration data", "Some layers"),
    ],
)
def test_the_demo_banner_says_all_when_every_read_layer_is_demo(app, tokyo, lang, all_demo, some):
    # Stored as earlier reports were: the layer not published marked real, as nothing was read.
    stored = {**tokyo, "layers": [
        {**row, "real": True} if row["key"] == "tsunami" else row for row in tokyo["layers"]
    ]}  # fmt: skip
    html = rendered(app, translate(stored, lang))
    banner = between(html, '<p class="report-demo"', "</p>")
    assert all_demo in banner and some not in banner
    # Nor is the unread layer tagged as real data in the table.
    row = between(html, '<tr class="report-level-none" data-layer="tsunami"', "</tr>")
    assert 'data-real="yes"' not in row


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_the_demo_banner_still_says_some_when_one_read_layer_is_real(app, yokohama, lang):
    stored = {**yokohama, "layers": [
        {**row, "real": row["key"] == "flood"} for row in yokohama["layers"]
    ]}  # fmt: skip
    html = rendered(app, translate(stored, lang))
    banner = between(html, '<p class="report-demo"', "</p>")
    assert ("一部の項目" if lang == "ja" else "Some layers") in banner


# --- 6. rough edges ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lang", "one", "three"),
    [("ja", "1ポイントが", "3ポイントが"), ("en", "1 point expires on", "3 points expire on")],
)
@pytest.mark.parametrize("path", ["/", "/points"])
def test_the_balance_says_when_its_points_expire(make_app, sql, lang, one, three, path):
    from tests.test_purchases import spend

    app, client, actions = signed_in(make_app, POINTS_VALID_DAYS=180)  # 3 welcome points
    (user_id,) = sql("SELECT id FROM users")[0]
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, reason, created_at)"
        " VALUES (%(u)s, 'grant', 2, 'welcome points', now() - interval '100 days')",
        u=user_id,
    )
    spend(sql, user_id, 1)  # from the oldest: 1 of the 2 is left, and the 3 of today
    due = dict(
        sql(
            "SELECT amount, ((created_at + interval '180 days') AT TIME ZONE 'Asia/Tokyo')::date"
            " FROM point_ledger WHERE kind = 'grant'"
        )
    )
    with client.session_transaction() as session:
        session["lang"] = lang
    html = client.get(path).get_data(as_text=True)
    listed = between(html, 'id="expiry"', "</ul>")
    assert f'data-expires="{due[2].isoformat()}" data-points="1"' in listed and one in listed
    assert f'data-expires="{due[3].isoformat()}" data-points="3"' in listed and three in listed


def test_points_that_never_expire_show_no_dates(make_app):
    app, client, actions = signed_in(make_app, POINTS_VALID_DAYS=0)
    assert 'id="expiry"' not in client.get("/").get_data(as_text=True)


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_every_time_zone_in_the_list_has_a_name_of_its_own(lang):
    from datetime import date

    from app.web import timezones

    for on in (date(2026, 1, 15), date(2026, 7, 15)):  # winter and summer offsets
        labels = [text for group in timezones.choices(lang, on).values() for _, text in group]
        repeated = {text for text in labels if labels.count(text) > 1}
        assert repeated == set()
    # IANA's old names for a zone (links) are not offered beside it; the zone itself is.
    zones = dict(pair for group in timezones.choices(lang, date(2026, 1, 15)).values()
                 for pair in group)  # fmt: skip
    assert {"America/Tijuana", "Pacific/Pago_Pago", "Europe/Kyiv"} <= set(zones)
    assert not {"America/Ensenada", "America/Santa_Isabel", "Pacific/Samoa"} & set(zones)


@pytest.mark.parametrize(
    ("city", "lang"), [("京都市", "ja"), ("Kyoto", "en"), ("相模原市", "ja"), ("浜松市", "en")]
)
def test_the_whole_city_preview_suggests_one_of_its_own_wards(make_app, city, lang):
    from app.assessment.place.gazetteer import gazetteer

    app, client, actions = signed_in(make_app)
    html = client.get(
        f"/assessments/place?query={city}", headers={"Accept-Language": lang}
    ).get_data(as_text=True)
    example = re.search(r"(?:例：|for example )([^）)]+)[）)]", html)[1]
    gaz = gazetteer()
    name = "name_ja" if lang == "ja" else "name_romaji"  # typed as the reader reads it
    assert any(gaz.is_ward(area) and getattr(area, name) == example for area in gaz.areas)
    assert resolve_place(example).name_ja.startswith(resolve_place(city).name_ja)


# --- 7. places a reader without Japanese can type ---------------------------------------------


@pytest.mark.parametrize(
    "link",
    [
        "https://www.google.com/maps/@35.6812,139.7671,15z",
        "https://www.google.com/maps?q=35.6812,139.7671",
        "https://maps.google.com/?q=35.6812%2C139.7671",
        "https://www.google.co.jp/maps/search/?api=1&query=35.6812,139.7671",
        "https://www.google.com/maps/place/%E6%9D%B1%E4%BA%AC%E9%A7%85/@35.6812,139.7671,17z",
        # The pin's own place (!3d lat !4d lon) counts over the view's centre (@).
        "https://www.google.com/maps/place/Tokyo+Station/@35.60,139.70,17z"
        "/data=!3m1!4b1!4m6!3m5!1s0x0:0x0!8m2!3d35.6812!4d139.7671",
    ],
)
def test_a_google_maps_link_is_read_as_its_point(link):
    area = resolve_place(link)
    assert (area.lat, area.lon) == (35.6812, 139.7671)
    assert area.address["precision"] == "point" and area.name_ja == "千代田区"


@pytest.mark.parametrize(
    ("lang", "said"), [("ja", "入力された地点"), ("en", "around the point you gave")]
)
def test_the_preview_reads_a_google_maps_link(make_app, lang, said):
    app, client, actions = signed_in(make_app)
    link = "https://www.google.com/maps/@35.6812,139.7671,15z"
    html = client.get(
        "/assessments/place", query_string={"query": link}, headers={"Accept-Language": lang}
    ).get_data(as_text=True)
    assert 'data-precision="point"' in html and 'data-place-code="131016@' in html
    assert said in html


@pytest.mark.parametrize(
    ("typed", "namesakes"),
    [
        ("Minato", {"東京都港区", "大阪府大阪市港区", "愛知県名古屋市港区"}),
        ("minato", {"東京都港区", "大阪府大阪市港区", "愛知県名古屋市港区"}),
        ("Kita", {"東京都北区", "大阪府大阪市北区", "北海道札幌市北区"}),
    ],
)
def test_a_name_several_municipalities_share_asks_which(typed, namesakes):
    with pytest.raises(PlaceAmbiguous) as asked:
        resolve_place(typed)
    offered = {area.prefecture_ja + area.name_ja for area in asked.value.choices}
    assert namesakes <= offered


@pytest.mark.parametrize(
    ("typed", "meant"), [("Chiyoda", "千代田区"), ("Yokohama", "横浜市"), ("横浜", "横浜市")]
)
def test_a_city_s_name_without_its_suffix_still_means_the_city(typed, meant):
    # 千代田町 (Gunma) and 横浜町 (Aomori) are not namesakes: their names differ in kind.
    assert resolve_place(typed).name_ja == meant


@pytest.mark.parametrize(
    ("lang", "said"), [("ja", "同じ名前"), ("en", "Several places have this name")]
)
def test_the_preview_asks_which_minato(make_app, lang, said):
    app, client, actions = signed_in(make_app)
    html = client.get(
        "/assessments/place", query_string={"query": "Minato"}, headers={"Accept-Language": lang}
    ).get_data(as_text=True)
    assert said in html and "data-place-code" not in html


def test_an_english_report_prints_no_raw_address_and_no_kana_its_sources_listed(make_app, sql):
    # Tokyo's tsunami data cover its islands only: the report said so with the catalogue's
    # raw URLs inline, beside a kana reading and the spot's mesh code.
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=0.2)
    job_id = job_id_from(actions.submit("東京都世田谷区三軒茶屋2-1-1", "en"))
    assert app.extensions["runner"].wait(15)
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    report = page[page.index('class="report"') : page.index("<footer")]
    text = re.sub(r"<[^>]+>", " ", report)  # what is read, not the links' addresses
    assert not re.search(r"https?://", text), re.findall(r".{60}https?://\S*", text)
    assert not re.search("[ぁ-ん]{2}", text), re.findall(r".{30}[ぁ-ん]{2}.{10}", text)
    assert "Sangenjaya 2-chome (三軒茶屋二丁目), Setagaya-ku, Tokyo" in text
    assert "covers its islands only" in text  # the reason, as before
    assert 'href="https://disaportal.gsi.go.jp/hazardmap/copyright/csv/tsunami.csv"' in page
    assert "coverage of the tsunami data (read 2026-10-06)" in text
