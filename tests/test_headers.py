"""Security headers on every response, the fast poll's included, and the cookies' flags."""

import re
from pathlib import Path

import pytest

from tests.conftest import signed_in
from tests.test_jobs import insert_job

ROOT = Path(__file__).resolve().parent.parent

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " frame-ancestors 'none';"
    " object-src 'none'; base-uri 'self'; form-action 'self'"
)


def assert_guarded(response):
    headers = response.headers
    assert headers["Content-Security-Policy"] == CSP
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"


def test_every_kind_of_response_carries_the_headers(make_app, sql):
    app, client, actions = signed_in(make_app)
    user_id = sql("SELECT id FROM users")[0][0]
    job = insert_job(sql, user_id, "running")
    responses = {
        "page": client.get("/"),
        "form": client.get("/assessments/new?query=x"),
        "fast poll": client.get(f"/assessments/{job}/status"),  # answered before Flask
        "404": client.get("/nope"),
        "405": client.get("/logout"),
        "csrf 400": client.post("/assessments", data={"query": "x", "lang": "en"}),
        "static": client.get("/static/css/app.css"),
        "signed out": app.test_client().get("/login"),
    }
    for name, response in responses.items():
        assert response.status_code < 500, name
        assert_guarded(response)


def test_the_session_cookie_is_samesite_lax_and_secure_on_request(make_app, monkeypatch):
    _, client, _ = signed_in(make_app)
    cookie = client.get_cookie("session")
    assert cookie.same_site == "Lax" and not cookie.secure and cookie.http_only

    monkeypatch.setenv("SESSION_COOKIE_SECURE", "1")
    from app.config import from_env

    assert from_env()["SESSION_COOKIE_SECURE"] is True
    monkeypatch.setenv("SESSION_COOKIE_SECURE", "0")
    assert from_env()["SESSION_COOKIE_SECURE"] is False

    app = make_app(SESSION_COOKIE_SECURE=True)
    secure = app.test_client()
    signup = secure.get("/signup", base_url="https://localhost")
    assert (
        "Secure" in signup.headers["Set-Cookie"] and "SameSite=Lax" in signup.headers["Set-Cookie"]
    )


INLINE = [
    (re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I), "an inline <script>"),
    (re.compile(r"<style\b", re.I), "a <style> block"),
    (re.compile(r"\sstyle\s*=", re.I), "a style= attribute"),
    (re.compile(r"\son[a-z]+\s*=", re.I), "an inline event handler"),
    (re.compile(r"javascript:", re.I), "a javascript: URL"),
]


@pytest.mark.parametrize("template", sorted((ROOT / "templates").rglob("*.html")), ids=str)
def test_no_template_needs_unsafe_inline(template):
    text = template.read_text()
    for pattern, what in INLINE:
        assert not pattern.search(text), f"{template.name} has {what}; the CSP refuses it"


def test_htmx_is_told_not_to_inject_its_indicator_style(client):
    assert '"includeIndicatorStyles": false' in client.get("/login").get_data(as_text=True)


@pytest.mark.server
def test_gunicorns_own_answers_carry_the_headers_and_a_script_name_header_is_ignored(live):
    # gunicorn answers these itself, before the app sees the request.
    import requests

    server = live()
    too_long = requests.get(server.url + "/" + "a" * 10_000, timeout=5)
    assert too_long.status_code == 414
    assert_guarded(too_long)
    too_large = requests.get(server.url + "/login", headers={"X-Big": "b" * 9_000}, timeout=5)
    assert too_large.status_code == 431
    assert_guarded(too_large)
    # A SCRIPT_NAME header is a proxy's to send; from anyone else, loopback too, it is ignored.
    mounted = requests.get(server.url + "/login", headers={"SCRIPT_NAME": "/elsewhere"}, timeout=5)
    assert mounted.status_code == 200
    assert "/elsewhere" not in mounted.text


@pytest.mark.server
def test_a_proxy_named_in_forwarded_allow_ips_is_believed(live):
    # Behind a proxy on this host that mounts the app under a prefix
    # (docs/deployment.md, "Behind a proxy").
    import requests

    server = live(FORWARDED_ALLOW_IPS="127.0.0.1")
    mounted = requests.get(
        server.url + "/elsewhere/login", headers={"SCRIPT_NAME": "/elsewhere"}, timeout=5
    )
    assert mounted.status_code == 200
    assert 'action="/elsewhere/login"' in mounted.text
