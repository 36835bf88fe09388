"""Accounts: sign up, log in, log out, and what bad input gets."""

import io

import pytest

from tests.conftest import Actions, csrf_token


def count_users(sql):
    return sql("SELECT count(*) FROM users")[0][0]


def test_signup_grants_points_and_signs_in(client, actions, sql):
    response = actions.signup("new@example.com")
    assert response.status_code == 303
    page = client.get("/").get_data(as_text=True)
    assert 'data-balance="3"' in page
    assert sql("SELECT email, point_balance FROM users") == [("new@example.com", 3)]
    hashed = sql("SELECT password_hash FROM users")[0][0]
    assert "correct horse" not in hashed and hashed.startswith(("scrypt:", "pbkdf2:"))


def test_spaces_around_the_email_are_dropped_at_signup_as_at_login(client, actions, sql):
    assert actions.signup("  spaced@example.com ").status_code == 303
    assert sql("SELECT email FROM users") == [("spaced@example.com",)]
    client.post("/logout", data={"csrf_token": actions.token("/")})
    assert actions.login(" spaced@example.com  ").status_code == 303


def test_duplicate_email_in_any_case_is_refused(client, actions, sql):
    actions.signup("Case@Example.com")
    client.post("/logout", data={"csrf_token": actions.token("/")})
    response = actions.signup("cASE@example.COM")
    assert response.status_code == 400
    assert "cannot be used for a new account" in response.get_data(as_text=True)
    assert count_users(sql) == 1


def test_login_logout_and_wrong_password(client, actions):
    actions.signup("me@example.com")
    assert client.post("/logout", data={"csrf_token": actions.token("/")}).status_code == 303
    assert client.get("/assessments").status_code == 302  # signed out: sent to log in

    wrong = actions.login("me@example.com", "not the password")
    assert wrong.status_code == 400
    assert "do not match" in wrong.get_data(as_text=True)
    assert client.get("/assessments").status_code == 302

    right = actions.login("ME@example.com")
    assert right.status_code == 303
    assert client.get("/assessments").status_code == 200


def test_form_without_csrf_token_is_refused(client, sql):
    response = client.post("/signup", data={"email": "a@example.com", "password": "long enough"})
    assert response.status_code == 400
    assert "form expired" in response.get_data(as_text=True)
    assert count_users(sql) == 0


@pytest.mark.parametrize(
    "email, password, message",
    [
        ("", "long enough", "Enter your email"),
        ("not-an-email", "long enough", "Invalid email"),
        ("a@example.com", "", "Choose a password"),
        ("a@example.com", "short", "8 to 128"),
        ("x" * 10_000 + "@example.com", "long enough", "Field cannot be longer"),
        ("a@example.com", "p" * 10_000, "8 to 128"),
    ],
)
def test_bad_signup_input_gets_400_and_writes_nothing(client, sql, email, password, message):
    token = csrf_token(client.get("/signup").get_data(as_text=True))
    response = client.post(
        "/signup", data={"email": email, "password": password, "csrf_token": token}
    )
    assert response.status_code == 400
    assert message in response.get_data(as_text=True)
    assert count_users(sql) == 0


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"email": ["a@example.com", "b@example.com"]},
        {"email": "\x00\x01", "password": "\x00" * 9},
    ],
)
def test_odd_input_never_gives_500(client, data):
    token = csrf_token(client.get("/login").get_data(as_text=True))
    for path in ("/signup", "/login"):
        response = client.post(path, data={**data, "csrf_token": token})
        assert 400 <= response.status_code < 500


def test_invalid_utf8_never_gives_500(client):
    token = csrf_token(client.get("/login").get_data(as_text=True))
    body = b"email=%ff%fe%40x.com&password=%c0%c0%c0%c0%c0%c0%c0%c0&csrf_token=" + token.encode()
    for path in ("/signup", "/login"):
        response = client.post(path, data=body, content_type="application/x-www-form-urlencoded")
        assert response.status_code < 500  # decoded with replacement characters


@pytest.mark.parametrize("path", ["/signup", "/login"])
@pytest.mark.parametrize("field", ["email", "password"])
def test_a_file_in_a_text_field_is_400_and_signs_nobody_up(client, sql, path, field):
    data = {"email": "file@example.com", "password": "correct horse"}
    data[field] = (io.BytesIO(data[field].encode()), "field.txt")
    token = csrf_token(client.get("/login").get_data(as_text=True))
    response = client.post(path, data={**data, "csrf_token": token})
    assert response.status_code == 400
    if path == "/signup":
        assert sql("SELECT count(*) FROM users") == [(0,)]


def test_oversized_body_is_refused(client):
    response = client.post("/signup", data={"email": "a" * 100_000})
    assert response.status_code == 413


@pytest.mark.parametrize("path", ["/nope", "/assessments/not-a-uuid"])
def test_error_pages_share_the_layout(client, actions, path):
    actions.signup()
    response = client.get(path)
    assert response.status_code == 404
    body = response.get_data(as_text=True)
    assert "Hazard&nbsp;Points" in body and "Error 404" in body


def test_healthz_reports_worker_and_database(client):
    body = client.get("/healthz").get_json()
    assert body["status"] == "ok" and body["db"] == "ok"
    assert isinstance(body["pid"], int) and body["jobs_running"] == 0


def test_signed_out_pages_send_to_login_and_back(client, actions):
    response = client.get("/assessments/new")
    assert response.status_code == 302
    assert response.headers["Location"] == "/login?next=/assessments/new"
    actions.signup("back@example.com")
    client.post("/logout", data={"csrf_token": actions.token("/")})
    back = client.post(
        "/login?next=/assessments/new",
        data={
            "email": "back@example.com",
            "password": "correct horse",
            "csrf_token": actions.token("/login"),
        },
    )
    assert back.headers["Location"] == "/assessments/new"


def test_login_never_redirects_off_site(client, actions):
    actions.signup("safe@example.com")
    client.post("/logout", data={"csrf_token": actions.token("/")})
    # Browsers drop tabs and newlines inside URLs: "/%09/evil.example" is "//evil.example".
    off_site = (
        "//evil.example",
        "https://evil.example/",
        "/\\evil.example",
        "/%09/evil.example",
        "/%0a/evil.example",
        "/%0d%0a/evil.example",
        "/%20/evil.example",
        "/%7f/evil.example",
    )
    for target in off_site:
        response = client.post(
            f"/login?next={target}",
            data={
                "email": "safe@example.com",
                "password": "correct horse",
                "csrf_token": actions.token("/login"),
            },
        )
        assert response.status_code == 303, target
        assert response.headers["Location"] == "/", target
        # Signed in, the login page redirects at once: the same check applies.
        response = client.get(f"/login?next={target}")
        assert (response.status_code, response.headers["Location"]) == (302, "/"), target
        client.post("/logout", data={"csrf_token": actions.token("/")})


def test_a_poll_after_the_session_ended_moves_the_page_to_login(client):
    job = "/assessments/00000000-0000-0000-0000-000000000000"
    response = client.get(
        job + "/status",
        headers={"HX-Request": "true", "HX-Current-URL": "http://127.0.0.1:8000" + job},
    )
    assert response.status_code == 401
    assert response.headers["HX-Redirect"] == f"/login?next={job}"


def test_pages_are_never_cached_and_signed_in_users_skip_login(client, actions):
    assert client.get("/login").headers["Cache-Control"] == "no-store"
    actions.signup("cache@example.com")
    assert client.get("/").headers["Cache-Control"] == "no-store"
    assert "no-store" not in client.get("/static/css/app.css").headers.get("Cache-Control", "")
    for path in ("/login", "/signup"):
        response = client.get(path)
        assert response.status_code == 302 and response.headers["Location"] == "/"


def from_address(app, address):
    """A browser of this app at another client address."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    return Actions(client)


def test_password_guessing_is_braked_per_account_and_address(app, client, actions):
    actions.signup("target@example.com")
    client.post("/logout", data={"csrf_token": actions.token("/")})
    guesser = from_address(app, "203.0.113.7")
    for _ in range(10):
        assert guesser.login("target@example.com", "guess-wrong").status_code == 400
    braked = guesser.login("target@example.com")  # even the right password waits there
    assert braked.status_code == 429
    body = braked.get_data(as_text=True)
    assert "Too many failed attempts" in body and "Try again in 15 minutes" in body
    assert 14 * 60 < int(braked.headers["Retry-After"]) <= 15 * 60
    # The owner, elsewhere, is not held by a stranger's guesses; other accounts neither.
    assert actions.login("TARGET@example.com").status_code == 303
    assert guesser.login("target@example.com", "x").status_code == 429


def test_the_wait_named_is_never_longer_than_the_window(make_app):
    # A second attempt in the same clock second as the first failure is where a wait
    # rounded up to the next whole second would read 901 s, "16 minutes", of a 15-minute brake.
    app = make_app(LOGIN_RATE_LIMIT="1 per 15 minutes")
    for host in range(1, 6):
        guesser = from_address(app, f"203.0.113.{100 + host}")
        assert guesser.login("someone@example.com", "guess").status_code == 400
        braked = guesser.login("someone@example.com", "guess")
        wait = int(braked.headers["Retry-After"])
        assert braked.status_code == 429 and 14 * 60 < wait <= 15 * 60, wait
        assert "Try again in 15 minutes." in braked.get_data(as_text=True)


def test_a_user_who_types_it_right_is_never_held(app, client, actions, sql):
    actions.signup("regular@example.com")
    for _ in range(15):
        client.post("/logout", data={"csrf_token": actions.token("/")})
        assert actions.login("regular@example.com").status_code == 303
        # A new browser is a stranger's: its log-in is counted first, then given back too.
        assert from_address(app, "192.0.2.33").login("regular@example.com").status_code == 303
    assert sql("SELECT count(*) FROM brake_hits WHERE position('/login-' in key) > 0") == [(0,)]


def test_guesses_across_accounts_are_braked_per_address(make_app):
    app = make_app(LOGIN_ADDRESS_RATE_LIMIT="3 per 15 minutes")
    sprayer = from_address(app, "198.51.100.9")
    for i in range(3):
        assert sprayer.login(f"victim{i}@example.com", "guess").status_code == 400
    assert sprayer.login("victim9@example.com", "guess").status_code == 429
    assert from_address(app, "198.51.100.10").login("a@example.com", "x").status_code == 400


def test_signups_are_braked_per_address(make_app, sql):
    app = make_app(SIGNUP_RATE_LIMIT="2 per hour")
    flood = from_address(app, "192.0.2.1")
    for _ in range(3):  # a form error is not an account: not counted
        assert flood.signup("typo").status_code == 400
    for _ in range(2):
        assert flood.signup().status_code == 303
        flood.client.post("/logout", data={"csrf_token": flood.token("/")})
    held = flood.signup()
    assert held.status_code == 429 and int(held.headers["Retry-After"]) > 3000
    assert sql("SELECT count(*) FROM users") == [(2,)]
    assert from_address(app, "192.0.2.2").signup().status_code == 303


def test_signups_naming_a_taken_email_are_braked_and_never_say_it_exists(make_app, sql):
    # Without email to send, a sign-up that works tells that the address was free; what a
    # stranger must not get is an unbraked stream of answers, nor the words "it exists".
    app = make_app(SIGNUP_RATE_LIMIT="3 per hour")
    from_address(app, "192.0.2.50").signup("taken@example.com")
    prober = from_address(app, "192.0.2.60")
    for _ in range(3):
        probe = prober.signup("taken@example.com", "another password")
        assert probe.status_code == 400
        body = probe.get_data(as_text=True)
        assert "already exists" not in body and "cannot be used for a new account" in body
    held = prober.signup("taken@example.com", "another password")
    assert held.status_code == 429 and int(held.headers["Retry-After"]) > 3000
    assert prober.signup().status_code == 429  # a new account from there waits too
    assert sql("SELECT count(*) FROM users") == [(1,)]
    assert from_address(app, "192.0.2.61").signup().status_code == 303


def test_the_owners_browser_is_not_locked_out_by_guesses_from_its_own_address(app):
    # An office behind one NAT: a stranger's guesses brake strangers there, not the browser
    # that signed in to the account before (its device cookie).
    owner = from_address(app, "198.51.100.20")
    owner.signup("office@example.com")
    owner.client.post("/logout", data={"csrf_token": owner.token("/")})
    stranger = from_address(app, "198.51.100.20")
    for _ in range(10):
        assert stranger.login("office@example.com", "guess-wrong").status_code == 400
    assert stranger.login("office@example.com").status_code == 429
    assert owner.login("office@example.com").status_code == 303
    # The cookie goes to /login only: the poll and every page carry none of it.
    cookie = owner.client.get_cookie("device", path="/login")
    assert cookie is not None and cookie.http_only and cookie.same_site == "Lax"
    assert owner.client.get_cookie("device", path="/") is None


def test_an_account_has_a_ceiling_of_guesses_across_addresses(make_app):
    app = make_app(LOGIN_ACCOUNT_RATE_LIMIT="5 per hour")
    owner = from_address(app, "192.0.2.200")
    owner.signup("wanted@example.com")
    owner.client.post("/logout", data={"csrf_token": owner.token("/")})
    for host in range(5):  # a botnet: one guess from each address
        assert (
            from_address(app, f"203.0.113.{host}").login("wanted@example.com", "g").status_code
            == 400
        )
    fresh = from_address(app, "203.0.113.99")
    assert fresh.login("wanted@example.com").status_code == 429  # even the right password
    assert fresh.login("other@example.com", "g").status_code == 400  # other accounts are not held
    # The owner's browser is braked on its own, not with the strangers.
    assert owner.login("wanted@example.com").status_code == 303


def test_a_device_cookie_has_its_own_brake_and_only_for_its_account(make_app):
    app = make_app(LOGIN_DEVICE_RATE_LIMIT="3 per 15 minutes", LOGIN_RATE_LIMIT="2 per 15 minutes")
    owner = from_address(app, "192.0.2.210")
    owner.signup("mine@example.com")
    owner.client.post("/logout", data={"csrf_token": owner.token("/")})
    for _ in range(3):
        assert owner.login("mine@example.com", "guess-wrong").status_code == 400
    # A stolen cookie whose own brake is full is a stranger's (OWASP): the strangers'
    # brakes, and the account's ceiling, count its guesses from then on.
    for _ in range(2):
        assert owner.login("mine@example.com", "guess-wrong").status_code == 400
    assert owner.login("mine@example.com").status_code == 429
    # A cookie of one account is a stranger's for another one; a forged one is nothing.
    assert from_address(app, "192.0.2.212").login("mine@example.com").status_code == 303
    prober = from_address(app, "192.0.2.211")
    prober.signup("prober@example.com")
    prober.client.post("/logout", data={"csrf_token": prober.token("/")})
    prober.client.set_cookie("device", "forged.value", path="/login")
    for _ in range(2):
        assert prober.login("mine@example.com", "guess-wrong").status_code == 400
    assert prober.login("mine@example.com", "guess-wrong").status_code == 429


def test_a_device_cookie_out_of_its_own_guesses_counts_toward_the_ceiling(make_app):
    app = make_app(
        LOGIN_DEVICE_RATE_LIMIT="2 per 15 minutes", LOGIN_ACCOUNT_RATE_LIMIT="3 per hour"
    )
    owner = from_address(app, "192.0.2.220")
    owner.signup("ceiling@example.com")
    owner.client.post("/logout", data={"csrf_token": owner.token("/")})
    for _ in range(2):  # the cookie's own guesses: not the account's ceiling
        assert owner.login("ceiling@example.com", "guess-wrong").status_code == 400
    for _ in range(3):  # then a stranger's, up to the ceiling
        assert owner.login("ceiling@example.com", "guess-wrong").status_code == 400
    assert owner.login("ceiling@example.com").status_code == 429
    fresh = from_address(app, "203.0.113.160")
    assert fresh.login("ceiling@example.com").status_code == 429  # the ceiling holds everyone


def test_signing_out_retires_every_other_browsers_device_cookie(make_app):
    # A device cookie outlives no "sign out on every device": a thief's copy is a stranger's
    # from then on, while the browser that signed out keeps one for the new generation.
    app = make_app(LOGIN_DEVICE_RATE_LIMIT="5 per 15 minutes", LOGIN_RATE_LIMIT="1 per 15 minutes")
    owner = from_address(app, "192.0.2.230")
    owner.signup("revoked@example.com")
    stolen = owner.client.get_cookie("device", path="/login").value
    thief = from_address(app, "203.0.113.230")
    thief.client.set_cookie("device", stolen, path="/login")
    assert thief.login("revoked@example.com", "guess-1").status_code == 400
    assert thief.login("revoked@example.com", "guess-2").status_code == 400  # own brake: 5
    owner.client.post("/account/logout-everywhere", data={"csrf_token": owner.token("/")})
    assert thief.login("revoked@example.com", "guess-3").status_code == 400  # a stranger now:
    assert thief.login("revoked@example.com", "guess-4").status_code == 429  # 1 per 15 minutes
    for _ in range(3):  # the owner's browser is still its own brake
        assert owner.login("revoked@example.com", "guess-wrong").status_code == 400
    assert owner.login("revoked@example.com").status_code == 303


def test_a_signed_out_submit_goes_to_login_and_writes_nothing(client, actions, sql):
    actions.signup("gone@example.com")
    token = actions.token("/assessments/new")
    client.post("/logout", data={"csrf_token": actions.token("/")})
    response = actions.submit(token=token)
    assert response.status_code == 302
    assert response.headers["Location"] == "/login?next=/assessments"
    assert sql("SELECT count(*) FROM assessment_jobs") == [(0,)]


def test_a_wrong_password_costs_the_same_work_whether_or_not_the_account_exists(
    client, actions, monkeypatch
):
    # Timing would tell which emails have accounts if an unknown one skipped the hash.
    # Count the work instead of the time: each path checks exactly one hash of one kind.
    from app.points import accounts

    actions.signup("known@example.com")
    client.post("/logout", data={"csrf_token": actions.token("/")})
    checked = []
    real = accounts.check_password_hash

    def counting(pwhash, password):
        checked.append(pwhash.split("$", 1)[0])  # the method and its cost parameters
        return real(pwhash, password)

    monkeypatch.setattr(accounts, "check_password_hash", counting)
    assert actions.login("known@example.com", "guess-wrong").status_code == 400
    known = list(checked)
    checked.clear()
    assert actions.login("unknown@example.com", "guess-wrong").status_code == 400
    assert known == checked and len(known) == 1, (known, checked)


@pytest.mark.server
def test_the_brake_holds_across_instances(live):
    # Two gunicorn instances, as `make cluster` runs: the counts are the database's, so a
    # guesser who alternates between them gets the attempts of one, not of each.
    from tests.live import User

    one = live(LOGIN_RATE_LIMIT="3 per 15 minutes")
    other = live(LOGIN_RATE_LIMIT="3 per 15 minutes")
    User(one).signup("shared@example.com")
    answers = []
    for server in (one, other, one, other, one):
        guesser = User(server)
        response = guesser.http.post(
            server.url + "/login",
            data={
                "email": "shared@example.com",
                "password": "guess-wrong",
                "csrf_token": guesser._token("/login"),
            },
            allow_redirects=False,
            timeout=10,
        )
        answers.append(response.status_code)
    assert answers == [400, 400, 400, 429, 429]


def _at_once(actions_list, attempt) -> list[int]:
    """Send one request per browser from real threads, released together; their statuses."""
    import threading

    barrier = threading.Barrier(len(actions_list))
    statuses = []

    def one(actions, token):
        barrier.wait(20)
        statuses.append(attempt(actions, token))

    tokens = [a.token(path) for a, path in ((a, "/login") for a in actions_list)]
    threads = [
        threading.Thread(target=one, args=(a, t)) for a, t in zip(actions_list, tokens, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return sorted(statuses)


def test_guesses_sent_at_once_get_no_more_password_checks_than_the_brake_allows(make_app, sql):
    # Eight browsers (own session and CSRF token each) guess one account from one address in
    # the same instant: each attempt is counted before its password is checked, so only the
    # brake's three get a check and an answer; the rest are 429, as sent one by one.
    app = make_app(LOGIN_RATE_LIMIT="3 per 15 minutes")
    browsers = [from_address(app, "203.0.113.77") for _ in range(8)]

    def guess(actions, token):
        data = {"email": "rushed@example.com", "password": "guess-wrong", "csrf_token": token}
        return actions.client.post("/login", data=data).status_code

    assert _at_once(browsers, guess) == [400] * 3 + [429] * 5
    assert sql("SELECT count(*) FROM brake_hits WHERE position('/login-account/' in key) > 0") == [
        (3,)
    ]


def test_signups_naming_a_taken_email_at_once_are_braked_as_one_by_one(make_app, sql):
    app = make_app(SIGNUP_RATE_LIMIT="3 per hour")
    from_address(app, "192.0.2.70").signup("taken-at-once@example.com")
    probers = [from_address(app, "192.0.2.71") for _ in range(8)]

    def probe(actions, token):
        data = {
            "email": "taken-at-once@example.com",
            "password": "another one",
            "csrf_token": token,
        }
        return actions.client.post("/signup", data=data).status_code

    assert _at_once(probers, probe) == [400] * 3 + [429] * 5
    assert sql("SELECT count(*) FROM users") == [(1,)]


def test_behind_a_trusted_proxy_each_client_address_has_its_own_brake(make_app):
    app = make_app(
        PROXY_FIX_X_FOR=1, FORWARDED_ALLOW_IPS="10.0.0.0/24", LOGIN_ADDRESS_RATE_LIMIT="2 per hour"
    )

    def via(remote, forwarded):
        browser = from_address(app, remote)
        browser.client.environ_base["HTTP_X_FORWARDED_FOR"] = forwarded
        return browser

    first = via("10.0.0.5", "203.0.113.1")
    for i in range(2):
        assert first.login(f"sprayed{i}@example.com", "g").status_code == 400
    assert first.login("sprayed9@example.com", "g").status_code == 429
    # Another client behind the same proxy is braked apart; the proxy's last hop is believed.
    assert (
        via("10.0.0.5", "198.51.100.3, 203.0.113.2").login("a@example.com", "g").status_code == 400
    )
    assert via("10.0.0.6", "203.0.113.1").login("b@example.com", "g").status_code == 429
    # From an untrusted address, X-Forwarded-For is the client's own words: ignored.
    for i in range(2):
        liar = via("192.0.2.99", f"198.51.100.{10 + i}")
        assert liar.login(f"liar{i}@example.com", "g").status_code == 400
    assert via("192.0.2.99", "198.51.100.50").login("c@example.com", "g").status_code == 429


def test_x_forwarded_for_is_ignored_unless_asked_for(make_app):
    app = make_app(FORWARDED_ALLOW_IPS="10.0.0.5", LOGIN_ADDRESS_RATE_LIMIT="1 per hour")
    for i, forwarded in enumerate(("203.0.113.1", "203.0.113.2")):
        browser = from_address(app, "10.0.0.5")
        browser.client.environ_base["HTTP_X_FORWARDED_FOR"] = forwarded
        expected = 400 if i == 0 else 429  # one brake: the proxy's address
        assert browser.login(f"one{i}@example.com", "g").status_code == expected


@pytest.mark.server
def test_guesses_sent_at_once_to_a_live_server_are_braked_as_one_by_one(live, sql):
    # The reviewer's reproduction, through gunicorn's eight threads: eight browsers, each
    # with its own session and CSRF token, guess one account in the same instant.
    import threading

    from tests.live import User

    server = live(LOGIN_RATE_LIMIT="3 per 15 minutes")
    guessers = [User(server) for _ in range(8)]
    tokens = [guesser._token("/login") for guesser in guessers]
    barrier = threading.Barrier(len(guessers))
    statuses = []

    def guess(guesser, token):
        barrier.wait(20)
        data = {"email": "rushed-live@example.com", "password": "guess", "csrf_token": token}
        response = guesser.http.post(
            server.url + "/login", data=data, allow_redirects=False, timeout=60
        )
        statuses.append(response.status_code)

    threads = [
        threading.Thread(target=guess, args=pair) for pair in zip(guessers, tokens, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert sorted(statuses) == [400] * 3 + [429] * 5
    assert sql("SELECT count(*) FROM brake_hits WHERE position('/login-account/' in key) > 0") == [
        (3,)
    ]
