"""What a point buys, seen through the test client: said before paying, controlled after."""

import html
import re
from pathlib import Path

from app.assessment.place.gazetteer import gazetteer
from app.assessment.place.resolver import query_for, resolve_place
from tests.conftest import Actions, csrf_token, job_id_from, signed_in, wait_for

DEMO = "demonstration data"


def test_demo_data_is_said_before_paying(make_app):
    app, client, actions = signed_in(make_app)
    form = client.get("/assessments/new").get_data(as_text=True)
    assert DEMO in form and 'aria-describedby="place-preview demo-note"' in form
    welcome = make_app().test_client().get("/").get_data(as_text=True)
    assert DEMO in welcome


def test_real_data_says_nothing_of_demonstrations(make_app):
    app, client, actions = signed_in(
        make_app, LAYER_PROVIDER="http", LAYER_HTTP_BASE_URL="http://127.0.0.1:9"
    )
    assert DEMO not in client.get("/assessments/new").get_data(as_text=True)
    assert DEMO not in app.test_client().get("/").get_data(as_text=True)


def test_paying_twice_for_the_same_report_needs_a_second_click(make_app, sql):
    app, client, actions = signed_in(make_app)
    first = job_id_from(actions.submit("Sapporo"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])

    again = actions.submit("札幌市")
    body = again.get_data(as_text=True)
    assert again.status_code == 409
    assert f'href="/assessments/{first}"' in body
    assert "Start a new one anyway (1 point)" in body and 'name="confirm" value="011002"' in body
    assert sql("SELECT count(*) FROM assessment_jobs") == [(1,)]

    token = csrf_token(body)
    confirmed = client.post(
        "/assessments",
        data={"query": "札幌市", "lang": "en", "confirm": "yes", "csrf_token": token},
    )
    assert confirmed.status_code == 303
    wait_for(lambda: sql("SELECT point_balance FROM users") == [(1,)])


def test_a_purged_or_other_place_report_is_no_duplicate(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id_from(actions.submit("Sapporo"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    assert actions.submit("Sendai").status_code == 303
    done = "SELECT count(*) FROM assessment_jobs WHERE status = 'succeeded'"
    wait_for(lambda: sql(done) == [(2,)])
    sql("UPDATE assessment_jobs SET result = NULL, result_purged_at = now()")
    assert actions.submit("Sapporo").status_code == 303


def test_the_other_language_is_free_and_the_same_figures(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id = job_id_from(actions.submit("Fuchu, Tokyo", "en"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])

    asked = actions.submit("府中市 東京都", "ja")
    body = asked.get_data(as_text=True)
    assert asked.status_code == 409
    assert f"/assessments/{job_id}?lang=ja" in body and "Read it in Japanese" in body

    english = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    japanese = client.get(f"/assessments/{job_id}?lang=ja").get_data(as_text=True)
    assert 'class="report" lang="en"' in english and 'class="report" lang="ja"' in japanese
    assert "総合ハザードスコア" in japanese
    stored = sql("SELECT result FROM assessment_jobs")[0][0]
    for layer in stored["layers"]:
        assert f"report-level-{layer['level'] or 'none'}" in japanese
    assert sql("SELECT count(*) FROM assessment_jobs") == [(1,)]
    assert sql("SELECT point_balance FROM users") == [(2,)]


def test_zero_points_is_one_message_with_the_way_to_points_and_a_disabled_button(make_app, sql):
    app, client, actions = signed_in(
        make_app, SIGNUP_POINTS=0, SUPPORT_CONTACT="points@hazard.example"
    )
    token = actions.token("/assessments/new")
    form = client.get("/assessments/new").get_data(as_text=True)
    refused = actions.submit("Sapporo", token=token)
    assert refused.status_code == 402
    for body in (form, refused.get_data(as_text=True)):
        assert body.count('class="alert"') == 1
        assert 'href="mailto:points@hazard.example"' in body
        assert '<button type="submit" class="button" disabled aria-describedby="no-points">' in body
    assert sql("SELECT count(*) FROM assessment_jobs") == [(0,)]


def test_every_choice_fills_the_form_with_words_naming_only_it():
    for area in gazetteer().areas:
        assert resolve_place(query_for(area)) == area


def test_a_cut_list_says_how_many_matched_and_a_choice_keeps_what_was_typed(client, sql):
    actions = Actions(client)
    actions.signup()
    body = actions.submit("Tokyo").get_data(as_text=True)
    total = sum(
        1 for a in gazetteer().areas if a.code.startswith("13") and not gazetteer().is_ward(a)
    )
    assert f"Showing 5 of the {total} places that match" in body
    assert "Type the city, ward, town or village to narrow it down" in body
    assert "Did you mean" not in body

    chosen = html.unescape(re.findall(r'href="(/assessments/new\?[^"]+)"', body)[0])
    form = client.get(chosen).get_data(as_text=True)
    assert "You typed “Tokyo”" in form
    query = re.search(r'id="query"[^>]*value="([^"]+)"', form) or re.search(
        r'value="([^"]+)"[^>]*id="query"', form
    )
    assert not query[1].isdigit() and resolve_place(query[1]).code.startswith("13")
    assert sql("SELECT count(*) FROM assessment_jobs") == [(0,)]


def test_the_headline_never_reads_milder_than_the_worst_layer():
    from app.assessment.report import analysis

    for area in gazetteer().areas[::7]:
        for lang in analysis.LANGS:
            scored = [
                {
                    "key": layer.key,
                    "index": 0.95 if layer.key == "landslide" else 0.05,
                    "numbers": {},
                }
                for layer in analysis.LAYERS
            ]
            report = analysis.describe(area, lang, scored)
            # The weighted mean alone (24) would say "low": the worst layer's band holds it.
            assert report["score"] == 80
            assert report["score_label"] == analysis.LABELS[lang][4]  # "Very high"
            worst = "landslide" if lang == "en" else "土砂災害"
            assert worst in report["narrative"].split("。")[0].split(".")[0]


def test_the_report_leads_with_the_worst_layer_and_explains_itself(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id = job_id_from(actions.submit("Fuchu, Tokyo"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    report = sql("SELECT result FROM assessment_jobs")[0][0]
    worst = max(report["layers"], key=lambda row: row["index"] or 0)
    levels = ["Very low", "Low", "Moderate", "High", "Very high"]
    assert levels.index(report["score_label"]) == worst["level"] - 1
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert "Greatest hazard" in page and worst["name"] in page
    # The rule sits beside the score, not folded away.
    rule = re.search(r'<p class="report-rule" data-rule>([^<]*)</p>', page)[1]
    assert rule.startswith("The overall level is the worst layer")
    assert "How the levels are scored" in page
    assert "upstream requests" not in page and "joined in-flight" not in page
    assert "Share of the area in the worst class present" in page
    seismic = next(row for row in report["layers"] if row["key"] == "seismic")
    chance = seismic["numbers"]["shaking_prob_30y"] * 100
    assert f'<span class="report-figure-value">{chance:.1f} %</span>' in page
    japanese = client.get(f"/assessments/{job_id}?lang=ja").get_data(as_text=True)
    assert "スコアの決め方" in japanese and "最も注意が必要な項目" in japanese


def test_the_figures_download_as_json_for_the_owner_only(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id = job_id_from(actions.submit("Sapporo"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    response = client.get(f"/assessments/{job_id}/report.json")
    assert response.status_code == 200 and response.mimetype == "application/json"
    assert response.headers["Content-Disposition"].startswith("attachment;")
    assert response.headers["Cache-Control"] == "no-store"  # private figures: no copy kept
    stored = sql("SELECT result FROM assessment_jobs")[0][0]
    assert response.get_json()["layers"] == stored["layers"]
    assert "cache" not in response.get_json()
    stranger = app.test_client()
    Actions(stranger).signup()
    assert stranger.get(f"/assessments/{job_id}/report.json").status_code == 404
    sql("UPDATE assessment_jobs SET result = NULL, result_purged_at = now()")
    assert client.get(f"/assessments/{job_id}/report.json").status_code == 404


def test_the_report_has_a_print_stylesheet():
    css = (Path(__file__).parent.parent / "static/css/report.css").read_text()
    assert "@media print" in css and "size: A4" in css


def test_ledger_and_history_rows_name_the_place_and_language(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id_from(actions.submit("Fuchu, Tokyo", "ja"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    points = client.get("/points").get_data(as_text=True)
    assert re.search(r"Used<span class=\"muted\"> · Fuchu, Tokyo .*\(日本語\)", points)
    history = client.get("/assessments").get_data(as_text=True)
    assert '<th scope="col">Language</th>' in history
    assert '<td data-label="Language">日本語</td>' in history
    assert '<a id="nav-balance" class="balance" href="/points"' in history
    assert 'href="/points">Points</a>' in history
