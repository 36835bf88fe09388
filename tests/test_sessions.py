"""Sessions: logging out kills every copy of the cookie, on every path that reads it."""

import pytest

from tests.conftest import Actions, csrf_token, signed_in
from tests.test_jobs import attr, insert_job
from tests.test_ledger import tamper
from tests.test_poll import recording

HTMX = {"HX-Request": "true", "HX-Current-URL": "http://localhost/assessments/x"}


def copy_of(app, client):
    """A second browser carrying a copy of the client's session cookie."""
    name = app.config["SESSION_COOKIE_NAME"]
    thief = app.test_client()
    thief.set_cookie(name, client.get_cookie(name).value)
    return thief


def user_id(sql):
    return sql("SELECT id FROM users ORDER BY id DESC LIMIT 1")[0][0]


def jobs(sql):
    return sql("SELECT count(*) FROM assessment_jobs")[0][0]


@pytest.fixture
def watched(make_app, sql):
    """A signed-up user with a running job, a copy of their cookie, and Flask's own paths."""
    app, client, uid, flask_paths = recording(make_app, sql)
    job = insert_job(sql, uid, "running")
    status_path = f"/assessments/{job}/status"
    return app, client, Actions(client), copy_of(app, client), status_path, flask_paths


def assert_dead(thief, status_path, sql):
    """The copied cookie gets nothing: not the poll, not a page, not a submit."""
    before = jobs(sql)
    assert thief.get(status_path).status_code == 302
    polled = thief.get(status_path, headers=HTMX)
    assert polled.status_code == 401 and polled.headers["HX-Redirect"].startswith("/login")
    assert thief.get("/points").status_code == 302
    assert thief.get("/account").status_code == 302
    token = csrf_token(thief.get("/login").get_data(as_text=True))
    submit = thief.post("/assessments", data={"query": "札幌市", "lang": "en", "csrf_token": token})
    assert submit.status_code == 302 and submit.headers["Location"].startswith("/login")
    assert jobs(sql) == before


def test_a_cookie_copied_before_logout_is_dead_after_it(watched, sql):
    app, client, actions, thief, status_path, flask_paths = watched
    # Before: the copy works everywhere, the live poll answered without Flask.
    assert attr(thief.get(status_path).get_data(as_text=True), "data-status") == "running"
    assert flask_paths == []
    assert thief.get("/points").status_code == 200

    assert client.post("/logout", data={"csrf_token": actions.token("/")}).status_code == 303
    assert_dead(thief, status_path, sql)
    assert_dead(client, status_path, sql)  # the browser that logged out, too


def test_log_out_everywhere_from_the_account_page(watched, sql):
    app, client, actions, thief, status_path, _ = watched
    page = client.get("/account")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "Log out everywhere" in html and "every device" in html
    assert 'href="/account"' in client.get("/").get_data(as_text=True)  # in the nav

    # Without the form's token nothing happens.
    assert client.post("/account/logout-everywhere").status_code == 400
    assert thief.get("/points").status_code == 200

    done = client.post("/account/logout-everywhere", data={"csrf_token": csrf_token(html)})
    assert done.status_code == 303 and done.headers["Location"] == "/login"
    assert_dead(thief, status_path, sql)

    # Logging in again issues a session of the new generation, which works.
    assert actions.login(sql("SELECT email FROM users")[0][0]).status_code == 303
    assert attr(client.get(status_path).get_data(as_text=True), "data-status") == "running"


def test_a_session_whose_user_is_gone_goes_to_login(watched, sql, database_url):
    app, client, actions, thief, status_path, _ = watched
    token = actions.token("/assessments/new")
    uid = user_id(sql)
    # The ledger is append-only for every role: only a superuser, past its triggers,
    # can delete an account with its history.
    for table, column in (("point_ledger", "user_id"), ("assessment_jobs", "user_id")):
        tamper(database_url, f"DELETE FROM {table} WHERE {column} = %(u)s", u=uid)
    tamper(database_url, "DELETE FROM users WHERE id = %(u)s", u=uid)
    submit = actions.submit(token=token)
    assert submit.status_code == 302 and submit.headers["Location"].startswith("/login")
    polled = client.get(status_path, headers=HTMX)
    assert polled.status_code == 401 and polled.headers["HX-Redirect"].startswith("/login")
    assert client.get(status_path).status_code == 302
    assert jobs(sql) == 0


def test_a_session_signed_before_generations_lasts_until_logout(make_app, sql):
    app, client, actions = signed_in(make_app)
    uid = user_id(sql)
    old = app.test_client()
    name = app.config["SESSION_COOKIE_NAME"]
    old.set_cookie(
        name, app.session_interface.get_signing_serializer(app).dumps({"_user_id": str(uid)})
    )
    assert old.get("/points").status_code == 200
    client.post("/logout", data={"csrf_token": actions.token("/")})
    assert old.get("/points").status_code == 302


@pytest.mark.parametrize("raw", ["1:x", "x:1", "1:-1", "¹:0", "1:²", "", ":"])
def test_a_malformed_session_id_is_signed_out(make_app, sql, raw):
    app, client, actions = signed_in(make_app)
    forged = Actions(app.test_client())
    name = app.config["SESSION_COOKIE_NAME"]
    signed = app.session_interface.get_signing_serializer(app).dumps({"_user_id": raw})
    forged.client.set_cookie(name, signed)
    assert forged.client.get("/points").status_code == 302
    job = insert_job(sql, user_id(sql), "running")
    assert forged.client.get(f"/assessments/{job}/status").status_code == 302


def test_a_key_rotation_signs_nobody_out_and_keeps_open_forms(make_app, sql, monkeypatch):
    monkeypatch.setenv("SECRET_KEY_FALLBACKS", " older key , old key")
    from app.config import from_env

    assert from_env()["SECRET_KEY_FALLBACKS"] == ["older key", "old key"]
    monkeypatch.delenv("SECRET_KEY_FALLBACKS")

    old, client, actions = signed_in(make_app, SECRET_KEY="old key")
    token = actions.token("/assessments/new")  # a form opened before the rotation
    new = make_app(SECRET_KEY="new key", SECRET_KEY_FALLBACKS=["old key"])
    rotated = copy_of(new, client)
    assert rotated.get("/points").status_code == 200
    submit = Actions(rotated).submit(token=token)
    assert submit.status_code == 303, submit.get_data(as_text=True)[:300]

    # A key dropped from the fallbacks is dead: its sessions and its tokens.
    gone = copy_of(make_app(SECRET_KEY="new key"), client)
    assert gone.get("/points").status_code == 302


def test_the_live_poll_never_reaches_the_rate_limiter(watched, monkeypatch):
    from app.extensions import limiter
    from app.web import brakes

    app, client, actions, _, status_path, flask_paths = watched
    asked = []
    real = limiter.identify_request
    monkeypatch.setattr(limiter, "identify_request", lambda: asked.append(1) or real())
    take = brakes.take  # what the log-in and sign-up views count with
    monkeypatch.setattr(brakes, "take", lambda *a: asked.append(2) or take(*a))
    for _ in range(3):
        assert attr(client.get(status_path).get_data(as_text=True), "data-status") == "running"
    assert asked == [] and flask_paths == []
    client.get("/points")  # nor does a page: only the two limited views ask it
    assert asked == []
    Actions(app.test_client()).login("who@example.com", "wrong")  # the spy works
    assert asked
