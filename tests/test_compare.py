"""Two homes side by side: finished reports chosen from the history, read in columns (issue 47).

Each column is one report named by its place, in the reader's language whatever the report's
own; per layer the value at the spot, the worst in the area read with its radius, the nearest
zones and the shaking probability. Another user's report is a 404; anything else that cannot
be compared is a 4xx that says why and changes nothing.
"""

import re
import uuid

import pytest

from tests.conftest import Actions, job_id_from, signed_in
from tests.test_jobs import attr, poll_until, settled

YOKOHAMA = "35.4540, 139.6380"  # 横浜市中区: a point, a 500 m circle
FUKUOKA = "33.5902, 130.4017"  # 福岡市中央区: a point


def finished(client, actions, place: str, lang: str):
    job_id = job_id_from(actions.submit(place, lang=lang))
    assert attr(poll_until(client, job_id, settled), "data-status") == "succeeded"
    return job_id


def reader(client, lang: str) -> None:
    with client.session_transaction() as session:
        session["lang"] = lang  # the interface's language, as the language menu sets it


@pytest.fixture
def two_homes(make_app):
    """A user with a Japanese report of Yokohama and an English one of Fukuoka."""
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=0)
    yokohama = finished(client, actions, YOKOHAMA, "ja")
    fukuoka = finished(client, actions, FUKUOKA, "en")
    return app, client, actions, yokohama, fukuoka


def compare(client, *ids):
    query = "&".join(f"ids={job_id}" for job_id in ids)
    return client.get(f"/assessments/compare?{query}")


def cell(html: str, layer: str, row: str, job_id) -> str:
    group = rf'<tbody class="compare-layer" data-layer="{layer}">(.*?)</tbody>'
    body = re.search(group, html, re.S)
    line = re.search(rf'<tr data-row="{row}">(.*?)</tr>', body[1], re.S)[1]
    return re.search(rf'<td data-job="{job_id}"[^>]*>(.*?)</td>', line, re.S)[1]


@pytest.mark.parametrize(
    ("lang", "yokohama_name", "fukuoka_name", "spot", "shaking", "circle", "tsunami"),
    [
        ("ja", "神奈川県横浜市中区", "福岡県福岡市中央区", "この地点の値",
         "30年以内に震度6弱以上の揺れが起きる確率", "地点から半径500mの円", "津波"),
        ("en", "Naka-ku", "Chuo-ku", "At the spot",
         "Chance of JMA seismic intensity 6 lower or stronger within 30 years",
         "a 500 m circle around the point", "Tsunami"),
    ],
)  # fmt: skip
def test_two_reports_read_side_by_side_in_the_reader_s_language(
    two_homes, sql, lang, yokohama_name, fukuoka_name, spot, shaking, circle, tsunami
):
    app, client, actions, yokohama, fukuoka = two_homes
    reader(client, lang)
    charged = sql("SELECT count(*) FROM point_ledger")[0][0]
    response = compare(client, yokohama, fukuoka)
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    head = re.search(r"<thead>(.*?)</thead>", html, re.S)[1]
    columns = re.findall(r'<th scope="col" data-job="([^"]+)">(.*?)</th>', head, re.S)
    assert [job_id for job_id, _ in columns] == [str(yokohama), str(fukuoka)]
    assert yokohama_name in columns[0][1] and fukuoka_name in columns[1][1]
    # Every layer has its rows, labelled in the reader's language, for both columns.
    assert spot in html and shaking in html and tsunami in html
    for layer in ("flood", "tsunami", "liquefaction", "landslide", "seismic"):
        for job_id in (yokohama, fukuoka):
            assert cell(html, layer, "spot", job_id).strip()
            assert circle in cell(html, layer, "worst", job_id)
    # The spot's value and the circle's worst, from the stored report, in the reader's words.
    stored = sql("SELECT result FROM assessment_jobs WHERE id = %(id)s", id=yokohama)[0][0]
    tsunami_row = next(row for row in stored["layers"] if row["key"] == "tsunami")
    at_point = tsunami_row["at_point"][lang]
    assert at_point in cell(html, "tsunami", "spot", yokohama)
    nearest = cell(html, "tsunami", "nearest", yokohama)
    assert len(re.findall(r"<li data-class=", nearest)) == len(tsunami_row["nearest"])
    seismic = next(row for row in stored["layers"] if row["key"] == "seismic")
    probability = cell(html, "seismic", "probability", yokohama)
    assert "%.1f %%" % (seismic["numbers"]["shaking_prob_30y"] * 100) in probability
    # Both built from demonstration data, and said so of both (not "some").
    all_demo = "デモ用のデータから作成したもので" if lang == "ja" else "These reports are built"
    assert all_demo in html
    # Both reports read the same 500 m circle: nothing to warn about.
    assert "data-radii-differ" not in html
    # Reading the English report in Japanese (and the other way) is free.
    assert sql("SELECT count(*) FROM point_ledger")[0][0] == charged


@pytest.mark.parametrize(
    ("lang", "said"), [("ja", "町丁目の代表点から半径1380mの円"), ("en", "a 1380 m circle around")]
)
def test_a_point_and_a_chome_read_over_different_radii_say_so(two_homes, sql, lang, said):
    app, client, actions, yokohama, fukuoka = two_homes
    sql(
        "UPDATE assessment_jobs SET result = jsonb_set(jsonb_set(result,"
        " '{area,radius_m}', '1380'), '{area,address,precision}', '\"chome\"')"
        " WHERE id = %(id)s",
        id=fukuoka,
    )
    reader(client, lang)
    html = compare(client, yokohama, fukuoka).get_data(as_text=True)
    note = re.search(r"<p class=\"compare-radii\"[^>]*>(.*?)</p>", html, re.S)[1]
    assert said in note and ("500m" if lang == "ja" else "500 m") in note
    assert 'data-radius="1380"' in html and 'data-radius="500"' in html


def test_another_user_s_report_is_not_found(two_homes, make_app):
    app, client, actions, yokohama, fukuoka = two_homes
    stranger = app.test_client()
    Actions(stranger).signup()
    assert compare(stranger, yokohama, fukuoka).status_code == 404
    mine_and_theirs = compare(client, yokohama, uuid.uuid4())
    assert mine_and_theirs.status_code == 404


@pytest.mark.parametrize(
    ("lang", "message"),
    [("ja", "2〜4件選んでください"), ("en", "Choose two to four finished reports")],
)
def test_fewer_than_two_or_more_than_four_say_how_many(two_homes, lang, message):
    app, client, actions, yokohama, fukuoka = two_homes
    reader(client, lang)
    five = [yokohama, fukuoka, uuid.uuid4(), uuid.uuid4(), uuid.uuid4()]
    for ids in ([yokohama], [], [yokohama, yokohama], five):
        response = compare(client, *ids)
        assert response.status_code == 400, ids
        assert message in response.get_data(as_text=True)


@pytest.mark.parametrize(
    ("lang", "message"), [("ja", "履歴から選び直してください"), ("en", "choose them again")]
)
def test_a_malformed_id_is_a_bad_request(two_homes, lang, message):
    app, client, actions, yokohama, fukuoka = two_homes
    reader(client, lang)
    response = compare(client, yokohama, "not-a-report")
    assert response.status_code == 400
    assert message in response.get_data(as_text=True)


@pytest.mark.parametrize(
    ("lang", "message"),
    [("ja", "比べられるのは完了したレポートだけです"), ("en", "Only finished reports")],
)
def test_an_unfinished_or_failed_report_cannot_be_compared(two_homes, sql, lang, message):
    app, client, actions, yokohama, fukuoka = two_homes
    sql(
        "UPDATE assessment_jobs SET status = 'failed', error_code = 'PROVIDER', result = NULL"
        " WHERE id = %(id)s",
        id=fukuoka,
    )
    before = sql("SELECT id, status, result IS NULL FROM assessment_jobs ORDER BY id")
    reader(client, lang)
    response = compare(client, yokohama, fukuoka)
    assert response.status_code == 409
    assert message in response.get_data(as_text=True)
    assert sql("SELECT id, status, result IS NULL FROM assessment_jobs ORDER BY id") == before


def test_the_history_offers_finished_reports_to_compare(two_homes):
    app, client, actions, yokohama, fukuoka = two_homes
    html = client.get("/assessments").get_data(as_text=True)
    form = re.search(r'<form method="get" action="/assessments/compare"(.*?)</form>', html, re.S)
    assert form, "no comparison form on the history"
    ticks = re.findall(r'<input type="checkbox" name="ids" value="([^"]+)"', form[1])
    assert sorted(ticks) == sorted([str(yokohama), str(fukuoka)])
    assert "csrf_token" not in form[1]  # a GET that changes nothing


def test_two_municipalities_show_no_rows_of_a_spot(make_app):
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=0)
    sapporo = finished(client, actions, "札幌市", "en")
    chiyoda = finished(client, actions, "千代田区", "ja")
    html = compare(client, sapporo, chiyoda).get_data(as_text=True)
    assert 'data-row="worst"' in html and 'data-row="probability"' in html
    assert 'data-row="spot"' not in html and 'data-row="nearest"' not in html
    assert "data-radii-differ" not in html  # two whole municipalities read alike


@pytest.mark.parametrize("older_first", [True, False])
def test_a_report_written_before_a_layer_was_read_compares_with_a_newer_one(
    two_homes, sql, older_first
):
    # Yokohama's report as stored before storm surge, inland flooding and the planned scale
    # were read.
    app, client, actions, yokohama, fukuoka = two_homes
    sql(
        "UPDATE assessment_jobs SET result = jsonb_set(result, '{layers}', (SELECT"
        " jsonb_agg(l) FROM jsonb_array_elements(result->'layers') l"
        " WHERE l->>'key' NOT IN ('storm_surge', 'inland_flood', 'flood_planned')))"
        " WHERE id = %(id)s",
        id=yokohama,
    )
    order = (yokohama, fukuoka) if older_first else (fukuoka, yokohama)
    response = compare(client, *order)
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    # The newer report's layers all have their rows; the older column says it did not read them.
    for layer in ("storm_surge", "inland_flood", "flood_planned"):
        assert "Not read by this report" in cell(html, layer, "worst", yokohama)
        assert "Not read by this report" not in cell(html, layer, "worst", fukuoka)
    assert "Not read by this report" not in cell(html, "flood", "worst", yokohama)
