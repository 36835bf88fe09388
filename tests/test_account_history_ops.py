"""The account's time zones and password, the history's headlines, the ops chart's axis."""

import re
from datetime import UTC, datetime, timedelta

from flask_babel import force_locale

from app.web import charts
from tests.conftest import Actions, job_id_from, signed_in, wait_for


def options(html: str) -> list[tuple[str, str]]:
    select = re.search(r'<select[^>]*id="timezone".*?</select>', html, re.S)[0]
    return re.findall(r'<option[^>]*value="([^"]+)"[^>]*>([^<]*)</option>', select)


def test_time_zones_are_offered_in_words_japan_first(make_app, sql):
    app, client, actions = signed_in(make_app)
    english = client.get("/account").get_data(as_text=True)
    assert options(english)[0] == ("Asia/Tokyo", "(UTC+09:00) Japan Time")
    assert "<optgroup" in english and "Africa/Abidjan</option>" not in english
    japanese = client.get("/account", headers={"Accept-Language": "ja"}).get_data(as_text=True)
    listed = options(japanese)
    assert listed[0] == ("Asia/Tokyo", "(UTC+09:00) 日本時間")
    assert not [t for _, t in listed if re.search(r"[A-Za-z]", t.replace("UTC", ""))]
    # Past the common ones, every place in order of its offset: neighbours sit together.
    every = [t for _, t in listed[16:]]
    offsets = [int(t[4:7]) * 60 + int(t[4] + t[8:10]) for t in every]
    assert offsets == sorted(offsets) and len(every) > 300
    token = actions.token("/account")
    client.post("/preferences", data={"lang": "en", "timezone": "UTC", "csrf_token": token})
    assert sql("SELECT timezone FROM users") == [("UTC",)]


def test_a_password_change_needs_the_current_one_and_signs_out_every_other_session(make_app, sql):
    app = make_app()
    here, there = app.test_client(), app.test_client()
    Actions(here).signup("pw@example.com")
    Actions(there).login("pw@example.com")
    assert there.get("/account").status_code == 200

    token = Actions(here).token("/account")
    wrong = here.post(
        "/account/password",
        data={"current_password": "nope", "new_password": "a new secret", "csrf_token": token},
    )
    assert wrong.status_code == 400
    assert "That is not your current password." in wrong.get_data(as_text=True)
    assert there.get("/account").status_code == 200  # nothing changed
    short = here.post(
        "/account/password",
        data={"current_password": "correct horse", "new_password": "short", "csrf_token": token},
    )
    assert short.status_code == 400

    done = here.post(
        "/account/password",
        data={"current_password": "correct horse", "new_password": "a new secret",
              "csrf_token": token},
    )  # fmt: skip
    assert done.status_code == 303
    assert here.get("/account").status_code == 200  # this session stays signed in
    assert there.get("/account").status_code == 302  # the other one is signed out
    assert Actions(app.test_client()).login("pw@example.com").status_code == 400
    assert Actions(app.test_client()).login("pw@example.com", "a new secret").status_code == 303


def test_the_history_shows_each_reports_score_and_greatest_hazard(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id_from(actions.submit("Sapporo"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    report = sql("SELECT result FROM assessment_jobs")[0][0]
    history = client.get("/assessments").get_data(as_text=True)
    worst = max(row["level"] or 0 for row in report["layers"])  # flood duration has none
    names = [row["name_en"] for row in report["layers"] if row["level"] == worst]
    cell = re.search(r'class="history-headline">(.*?)</td>', history, re.S)[1]
    assert f'data-score="{report["score"]}"' in cell
    assert ", ".join(names) in cell and f"{worst}/5" in cell


def test_a_week_of_hours_is_labelled_at_each_midnight_evenly(app):
    end = datetime(2026, 11, 30, 23, tzinfo=UTC)
    rows = [
        {"hour": end - timedelta(hours=h), "succeeded": 1, "failed": 0} for h in range(167, -1, -1)
    ]
    with app.test_request_context(), force_locale("en"):
        week = charts.stacked_hours(rows, {"succeeded": "succeeded", "failed": "failed"})
        day = charts.stacked_hours(rows[-24:], {"succeeded": "succeeded", "failed": "failed"})
    gaps = {round(b[0] - a[0], 1) for a, b in zip(week.ticks, week.ticks[1:], strict=False)}
    assert len(week.ticks) == 7 and len(gaps) == 1, week.ticks
    labels = [text for _, text in week.ticks]
    assert len(set(labels)) == 7  # one label a day, each a different date
    # On the reader's clock (Asia/Tokyo until they choose): the day began at 09:00 there.
    assert [text for _, text in day.ticks] == ["12:00", "18:00", "00:00", "06:00"]
