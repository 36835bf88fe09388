"""Where a poll's time goes: per-call costs of its parts, in-process, one thread.

No gunicorn and no other thread: each part runs N times in a row against the benchmark
database and the best of a few repeats is kept. The parts add up to roughly one poll
(the Flask test client runs the whole request without the HTTP server):

- whole requests through the test client: constant, SELECT 1, the status fragment, and
  the status fragment with Flask-Login's template context processor (which loads the
  user for `current_user` on every render_template) taken out;
- Flask-Login's user load (`db.session.get(User, id)`), with the pool checkout it
  triggers (pool_pre_ping: a round trip of its own), against a raw psycopg PK SELECT;
- the poll's SELECT (views.VIEW_SQL) through the ORM session, through Core on a pooled
  connection (the app's pool: ping on checkout, rollback on return), through Core on a
  pool without either (autocommit), through raw psycopg, and the same raw SELECT without
  the staleness column (alternating with it, best of many); views.view() as a whole;
- the status template;
- the fast poll itself (app/web/poll.py's middleware, called as gunicorn calls it, without
  HTTP): a whole answer rendered and answered 304 (alternating), its session read (kept,
  and verified anew), its latency histogram's observe, and its template as it renders it.
"""

import os
import re
from collections.abc import Callable
from time import perf_counter

from .common import USER_AGENT, Database, best_ns, log
from .table import Row, check, num, table


def _best_ms(fn: Callable[[], object], n: int, repeats: int) -> float:
    return best_ns(fn, n, repeats) / 1e6


def _alternating(a, b, n: int, repeats: int) -> tuple[float, float]:
    """The best ms per call of a and of b, measured in turn 3 x repeats times.

    For differences of a few microseconds: a noisy moment favours neither.
    """
    best_a = best_b = float("inf")
    for _ in range(3 * repeats):
        best_a = min(best_a, _best_ms(a, n, 1))
        best_b = min(best_b, _best_ms(b, n, 1))
    return best_a, best_b


def _psycopg_sql(sql: str) -> str:
    return re.sub(r"(?<!:):(\w+)", r"%(\1)s", sql)


def run(db: Database, n: int = 500, repeats: int = 3) -> dict:
    import psycopg
    from flask import render_template
    from flask_login.utils import _create_identifier
    from flask_migrate import upgrade
    from sqlalchemy import create_engine

    os.environ["DATABASE_URL"] = db.url
    os.environ.setdefault("SECRET_KEY", "bench-secret")
    from app.extensions import db as sa
    from app.jobs import transitions, views
    from app.models import User

    from . import benchapp

    app = benchapp.app
    app.config["JOB_LEASE_SECONDS"] = 3600  # the row below must never look stale here
    with app.app_context():
        upgrade()
        sa.session.remove()
    db.truncate()
    with db.connect() as conn:
        uid = conn.execute(
            "INSERT INTO users (email, password_hash) VALUES ('parts@bench.example', 'x')"
            " RETURNING id"
        ).fetchone()[0]
        job_id = conn.execute(
            "INSERT INTO assessment_jobs (user_id, query_text, lang, status, started_at,"
            " heartbeat_at, step) VALUES (%s, '札幌市', 'en', 'running', now(), now(),"
            " 'Fetching') RETURNING id",
            (uid,),
        ).fetchone()[0]

    client = app.test_client()
    headers = {"User-Agent": USER_AGENT, "HX-Request": "true"}
    with app.test_request_context(headers={"User-Agent": USER_AGENT}):
        identifier = _create_identifier()
    with client.session_transaction(headers={"User-Agent": USER_AGENT}) as session:
        session.update({"_user_id": str(uid), "_fresh": True, "_id": identifier})

    def get(path: str) -> Callable[[], None]:
        def call() -> None:
            r = client.get(path, headers=headers)
            if r.status_code != 200:
                raise RuntimeError(f"{path}: {r.status_code}")

        return call

    status_path = f"/assessments/{job_id}/status"
    client.get(status_path, headers=headers)  # the first answer may refresh the session
    if "Set-Cookie" in client.get(status_path, headers=headers).headers:
        raise RuntimeError("every status response rewrites the session cookie")
    out: dict[str, float] = {}
    log("poll_parts: whole requests through the test client")
    out["request_constant_ms"] = _best_ms(get("/bench/constant"), n, repeats)
    out["request_select1_ms"] = _best_ms(get("/bench/select1"), n, repeats)
    out["request_status_ms"] = _best_ms(get(status_path), n, repeats)
    # Flask-Login's context processor loads the user (an ORM get) on every render_template.
    processors = app.template_context_processors[None]
    kept = list(processors)
    processors[:] = [f for f in kept if f.__name__ != "_user_context_processor"]
    if len(processors) < len(kept):
        out["request_status_without_user_context_processor_ms"] = _best_ms(
            get(status_path), n, repeats
        )
    processors[:] = kept

    log("poll_parts: the parts")
    raw = psycopg.connect(db.url, autocommit=True)
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    plain_engine = create_engine(url, pool_pre_ping=False)
    # The same pool without the ping on checkout and without BEGIN/ROLLBACK around a read.
    lean_engine = create_engine(url, pool_pre_ping=False, isolation_level="AUTOCOMMIT")
    # A new user's session generation is 0.
    params = {"id": job_id, "user": uid, "lease": 3600.0, "deadline": 7200.0, "late": 25.0}
    params["gen"] = 0
    raw_view = _psycopg_sql(views.VIEW_SQL.text)
    raw_view_nocheck = _psycopg_sql(views.VIEW_SQL.text.replace(transitions.STALE, "false"))
    nocheck = {"id": job_id, "user": uid, "late": 25.0, "gen": 0}
    user_sql = "SELECT id, email, role, point_balance FROM users WHERE id = %s"

    def orm_user() -> None:
        sa.session.get(User, uid)
        sa.session.remove()  # what Flask-SQLAlchemy does at the end of a request

    def view_sql_session() -> None:
        sa.session.execute(views.VIEW_SQL, params).first()
        sa.session.rollback()

    def view_sql(engine) -> Callable[[], None]:
        def call() -> None:
            with engine.connect() as conn:
                conn.execute(views.VIEW_SQL, params).first()

        return call

    with app.app_context():
        parts = {
            "pool_checkout_pre_ping": lambda: sa.engine.connect().close(),
            "pool_checkout_no_ping": lambda: plain_engine.connect().close(),
            "orm_get_user": orm_user,
            "raw_select_user": lambda: raw.execute(user_sql, (uid,)).fetchone(),
            "view_sql_session": view_sql_session,
            "view_sql_core": view_sql(sa.engine),
            "view_sql_core_autocommit_noping": view_sql(lean_engine),
        }
        out |= {f"{name}_ms": _best_ms(fn, n, repeats) for name, fn in parts.items()}
        # The staleness column's cost is a few microseconds: the two alternate.
        out["view_sql_raw_ms"], out["view_sql_raw_nocheck_ms"] = _alternating(
            lambda: raw.execute(raw_view, params).fetchone(),
            lambda: raw.execute(raw_view_nocheck, nocheck).fetchone(),
            n,
            repeats,
        )
        out["raw_select_1_ms"] = _best_ms(lambda: raw.execute("SELECT 1").fetchone(), n, repeats)

    with app.test_request_context(status_path, headers=headers):
        job = views.view(job_id, uid)
        out["jobviews_view_ms"] = _best_ms(lambda: views.view(job_id, uid), n, repeats)
        out["template_ms"] = _best_ms(
            lambda: render_template("partials/_job_status.html", job=job, report=None, oob=True),
            n,
            repeats,
        )
        sa.session.remove()
    out.update(_fast_poll(app, client, status_path, headers, job_id, uid, n, repeats))
    raw.close()
    plain_engine.dispose()
    lean_engine.dispose()
    with app.app_context():
        sa.engine.dispose()
    return out


def _fast_poll(app, client, status_path, headers, job_id, uid, n, repeats) -> dict:
    """The fast poll's parts, in-process: the middleware called with a WSGI environ."""
    from flask import g
    from werkzeug.test import EnvironBuilder

    from app.jobs import views
    from app.web import poll

    def fell_through(environ, start_response):
        raise RuntimeError("the fast poll sent this poll to Flask")

    live = poll.LivePoll(app, fell_through)
    name = app.config["SESSION_COOKIE_NAME"]
    cookie = f"{name}={client.get_cookie(name).value}"
    environ = EnvironBuilder(path=status_path, headers={**headers, "Cookie": cookie}).get_environ()
    answered: list[str] = []
    answered_headers: list[list] = []

    def start_response(status, response_headers):
        answered.append(status)
        answered_headers.append(response_headers)

    def whole() -> None:
        b"".join(live(environ, start_response))

    whole()
    if answered[-1] != "200 OK":
        raise RuntimeError(f"fast poll: {answered[-1]}")
    out = {"fast_poll_ms": _best_ms(whole, n, repeats)}
    etag = dict(answered_headers[-1]).get("ETag")
    if etag:  # a browser that kept the fragment asks with its ETag: 304, nothing rendered
        asked = {**environ, "HTTP_IF_NONE_MATCH": etag}

        def unchanged() -> None:
            b"".join(live(asked, start_response))

        unchanged()
        if answered[-1] != "304 Not Modified":
            raise RuntimeError(f"fast poll with If-None-Match: {answered[-1]}")
        rendered, kept = _alternating(whole, unchanged, n, repeats)
        out["fast_poll_ms"] = min(out["fast_poll_ms"], rendered)
        out["fast_poll_unchanged_ms"] = kept
    out["fast_poll_session_ms"] = _best_ms(lambda: live.session_data(environ), n, repeats)
    # What the poll's latency histogram costs it: two clock reads and one observe.
    from app.operations import metrics

    def observed() -> None:
        began = perf_counter()
        metrics.POLL_FAST.observe(perf_counter() - began)

    out["fast_poll_metrics_ms"] = _best_ms(observed, n, 3 * repeats)
    if hasattr(live, "_verify"):  # what a cookie not seen before costs: parse and verify
        cookies = environ["HTTP_COOKIE"]
        out["fast_poll_session_verify_ms"] = _best_ms(lambda: live._verify(cookies), n, repeats)
    with app.app_context():
        g.locale = "en"
        job = views.live_view(job_id, uid, 0)
        template = app.jinja_env.get_template(poll.FRAGMENT)
        out["fast_poll_template_ms"] = _best_ms(
            lambda: template.render(
                job=job, report=None, oob=True, config=app.config, status_url=status_path
            ),
            n,
            repeats,
        )
    return out


NUMBER, NAME = "1c'", "where a poll's time goes"


def _share(number: str, figure: str, part_ms: float, poll_ms: float, poll: str) -> Row:
    """A row for a part's cost per poll and its share of the poll: at most 3 %."""
    share = part_ms / poll_ms
    said = f"{num(1000 * part_ms, 1, ' us')} = {num(100 * share, 2, ' %')} of a poll"
    return Row(number, figure, said, f"{poll} {num(poll_ms, 2, ' ms')} in-process",
               num(1 + share, 3, "x"), "<= 3 %", check(share, lambda v: v <= 0.03))  # fmt: skip


def summary(r: dict) -> list[Row]:
    """Rows 1f' and 1c': the histogram's and the staleness column's share of a poll."""
    try:
        cost_ms = r["view_sql_raw_ms"] - r["view_sql_raw_nocheck_ms"]
        figure = "reaper check on a healthy poll: staleness column's cost per poll"
        staleness = _share("1c'", figure + " (in-process, precise)", cost_ms,
                           r["request_status_ms"], "poll")  # fmt: skip
    except (KeyError, TypeError, ZeroDivisionError):
        return []
    if not (r.get("fast_poll_metrics_ms") and r.get("fast_poll_unchanged_ms")):
        return [staleness]
    # The histogram against the cheapest poll (answered 304), where its share is largest.
    figure = "the poll's latency histogram: its cost per poll (in-process, precise)"
    return [_share("1f'", figure, r["fast_poll_metrics_ms"], r["fast_poll_unchanged_ms"],
                   "poll answered 304"), staleness]  # fmt: skip


def details(r: dict) -> list[str]:
    """Its section: every part's time per call."""
    rows = ((k.removesuffix("_ms"), f"{v:.3f}") for k, v in r.items())
    title = "### Where a poll's time goes (in-process, one thread, best of 3)"
    return [title, "", *table(("part", "ms per call"), rows), ""]
