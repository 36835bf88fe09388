"""The job page's poll of a live job, answered before Flask's request machinery.

Every open job page asks for its status fragment every couple of seconds, so this one
GET is most of what the worker serves. Through Flask's whole request (routing, hooks,
the response object) a poll cost the worker about 1.9 ms, and the open-loop benchmark
(1,000 browsers, 500 polls/s) found the worker saturated. Here a poll of a live job is
the session check Flask itself does, the poll's one SELECT and the fragment's template.

Only the poll that has nothing to do but read is answered here: a signed session, a job
of this user that is pending or running and not stale. Everything else (no session, a
malformed or unknown id, another user's job, a job to reap or to settle, a finished job
and its report, a permanent session Flask would refresh, any error) goes on to Flask,
which answers it as before.
"""

import logging
import re
from collections.abc import Callable, Iterable
from time import perf_counter

from flask import Flask, g
from flask.sessions import SecureCookieSessionInterface
from itsdangerous import BadSignature
from werkzeug.http import parse_cookie

from ..database import dbretry
from ..jobs import housekeeping, views
from ..operations import metrics
from . import i18n
from .auth import identity_of

log = logging.getLogger(__name__)

STATUS_PATH = re.compile(r"/assessments/([0-9a-fA-F-]{32,36})/status")
FRAGMENT = "partials/_job_status.html"


class LivePoll:
    """WSGI middleware: `app.wsgi_app = LivePoll(app, app.wsgi_app)`."""

    path = STATUS_PATH

    def __init__(self, app: Flask, wsgi_app: Callable):
        if not isinstance(app.session_interface, SecureCookieSessionInterface):
            raise TypeError("the fast poll reads Flask's signed cookie sessions only")
        self.app = app
        self.wsgi_app = wsgi_app
        self.headers = app.extensions["security_headers"]  # as Flask's responses carry

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ["REQUEST_METHOD"] == "GET":
            match = self.path.fullmatch(environ.get("PATH_INFO", ""))
            if match:
                began = perf_counter()
                if (body := self.fragment(environ, match[1])) is None:
                    response = self.wsgi_app(environ, start_response)
                    metrics.POLL_FULL.observe(perf_counter() - began)
                    return response
                start_response(
                    "200 OK",
                    [
                        ("Content-Type", "text/html; charset=utf-8"),
                        ("Content-Length", str(len(body))),
                        ("Cache-Control", "no-store"),  # as main.no_store_pages sets
                        ("Vary", "Cookie"),  # as Flask says of a response that read the session
                        *self.headers,
                    ],
                )
                metrics.POLL_FAST.observe(perf_counter() - began)  # one observe per poll
                return [body]
        return self.wsgi_app(environ, start_response)

    def fragment(self, environ: dict, raw_id: str) -> bytes | None:
        """The live job's fragment, or None to let Flask answer."""
        session = self.session_data(environ)
        identity = identity_of(session) if session is not None else None
        job_id = views.parse_id(raw_id)
        if identity is None or job_id is None:
            return None
        app = self.app
        with app.app_context():
            # The page's language, from the session just decoded (or the cached reading
            # of Accept-Language): i18n.select_locale() takes it from g, without a query.
            g.locale = i18n.language_of(session, environ.get("HTTP_ACCEPT_LANGUAGE"))
            try:
                job = views.live_view(job_id, *identity)  # the generation checked in SQL
                if job is None:
                    return None
                housekeeping.trigger(app)
                # The URL this poll came to is the one url_for builds for it.
                status_url = environ.get("SCRIPT_NAME", "") + environ["PATH_INFO"]
                html = app.jinja_env.get_template(FRAGMENT).render(
                    job=job, report=None, oob=True, config=app.config, status_url=status_url
                )
            except Exception as exc:  # noqa: BLE001 - e.g. the database is down
                # Flask runs the poll again and answers with its error page; an outage
                # is logged once by that page, not once per poll here.
                if not dbretry.is_unreachable(exc):
                    log.warning("fast poll failed; the full path answers", exc_info=True)
                return None
        return html.encode()

    def session_data(self, environ: dict) -> dict | None:
        """The session, read from its signed cookie as Flask reads it; None if unusable."""
        app = self.app
        interface = app.session_interface
        cookie = parse_cookie(environ.get("HTTP_COOKIE")).get(interface.get_cookie_name(app))
        serializer = interface.get_signing_serializer(app)
        if not cookie or serializer is None:
            return None
        try:
            data = serializer.loads(
                cookie, max_age=int(app.permanent_session_lifetime.total_seconds())
            )
        except BadSignature:
            return None
        if not isinstance(data, dict):
            return None
        if data.get("_permanent") and app.config["SESSION_REFRESH_EACH_REQUEST"]:
            return None  # Flask would send the cookie again with a new expiry
        return data
