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

A poll whose fragment would be the one the browser already has (the row unchanged but for
the elapsed seconds and the time left, which the page counts on by itself) is answered
304 Not Modified without rendering: the fragment carries an ETag, Cache-Control
`no-cache` lets the browser keep it and ask with If-None-Match, and the browser hands
htmx the kept copy as a 200.
"""

import functools
import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from time import perf_counter
from types import MappingProxyType
from typing import Any

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
# A live fragment may be kept, but only to be asked about again (If-None-Match) on every
# poll, and by the browser alone: it is the user's own page. A settled one is no-store.
CACHE_CONTROL = "no-cache, private"
SESSIONS_KEPT = 1024  # signed session cookies already verified, per process


def fragment_build(app: Flask) -> str:
    """Digest what every fragment depends on but the job: templates, catalogs, poll interval.

    Computed once per process: a deploy that changes any of them changes every ETag.
    """
    digest = hashlib.blake2b(digest_size=8)
    for name in (FRAGMENT, "_macros.html"):
        digest.update(app.jinja_env.loader.get_source(app.jinja_env, name)[0].encode())
    directory = Path(app.extensions["babel"].translation_directories[0])
    for code in i18n.LANGUAGES:
        catalog = directory / code / "LC_MESSAGES" / "messages.mo"
        digest.update(catalog.read_bytes() if catalog.exists() else code.encode())
    digest.update(repr(app.config["POLL_INTERVAL_SECONDS"]).encode())
    return digest.hexdigest()


def fragment_etag(app: Flask, job: views.JobView, language: str, url: str) -> str:
    """The ETag of a live job's fragment: it changes whenever the fragment's text would.

    The row but for the clock (job.version, the drain notice included), the language, the
    URL, and the recent jobs' typical time (read once a minute per process). The elapsed
    seconds and the time left are left out: the page counts them on from the progress and
    that typical time (static/js/job-elapsed.js).
    """
    typical = "" if job.typical is None else f"{job.typical:.1f}"
    key = "|".join((app.extensions["fragment_build"], job.version, language, url, typical))
    return '"' + hashlib.blake2b(key.encode(), digest_size=12).hexdigest() + '"'


def matches(if_none_match: str | None, etag: str) -> bool:
    """Tell whether a request's If-None-Match names etag (weakly, as RFC 9110 compares)."""
    if not if_none_match:
        return False
    return any(tag.strip().removeprefix("W/") in (etag, "*") for tag in if_none_match.split(","))


class LivePoll:
    """WSGI middleware: `app.wsgi_app = LivePoll(app, app.wsgi_app)`."""

    path = STATUS_PATH

    def __init__(self, app: Flask, wsgi_app: Callable):
        if not isinstance(app.session_interface, SecureCookieSessionInterface):
            raise TypeError("the fast poll reads Flask's signed cookie sessions only")
        self.app = app
        self.wsgi_app = wsgi_app
        self.headers = app.extensions["security_headers"]  # as Flask's responses carry
        app.extensions.setdefault("fragment_build", fragment_build(app))
        # A cookie verified once verifies again (same key): only its age is checked anew.
        self.verified = functools.lru_cache(maxsize=SESSIONS_KEPT)(self._verify)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ["REQUEST_METHOD"] == "GET":
            match = self.path.fullmatch(environ.get("PATH_INFO", ""))
            if match:
                began = perf_counter()
                if (answer := self.fragment(environ, match[1])) is None:
                    response = self.wsgi_app(environ, start_response)
                    metrics.POLL_FULL.observe(perf_counter() - began)
                    return response
                etag, body = answer
                headers = [
                    ("ETag", etag),
                    ("Cache-Control", CACHE_CONTROL),
                    ("Vary", "Cookie"),  # as Flask says of a response that read the session
                    *self.headers,
                ]
                if body is None:  # the browser has this fragment already
                    start_response("304 Not Modified", headers)
                    metrics.POLL_UNCHANGED.observe(perf_counter() - began)
                    return []
                start_response(
                    "200 OK",
                    [
                        ("Content-Type", "text/html; charset=utf-8"),
                        ("Content-Length", str(len(body))),
                        *headers,
                    ],
                )
                metrics.POLL_FAST.observe(perf_counter() - began)  # one observe per poll
                return [body]
        return self.wsgi_app(environ, start_response)

    def fragment(self, environ: dict, raw_id: str) -> tuple[str, bytes | None] | None:
        """The live job's ETag and fragment (None if the browser has it), or None for Flask."""
        session = self.session_data(environ)
        identity = identity_of(session) if session is not None else None
        job_id = views.parse_id(raw_id)
        if identity is None or job_id is None:
            return None
        app = self.app
        with app.app_context():
            # The page's language, from the session just decoded (or the cached reading
            # of Accept-Language): i18n.select_locale() takes it from g, without a query.
            language = g.locale = i18n.language_of(session, environ.get("HTTP_ACCEPT_LANGUAGE"))
            try:
                job = views.live_view(job_id, *identity)  # the generation checked in SQL
                if job is None:
                    return None
                housekeeping.trigger(app)
                # The URL this poll came to is the one url_for builds for it.
                status_url = environ.get("SCRIPT_NAME", "") + environ["PATH_INFO"]
                etag = fragment_etag(app, job, language, status_url)
                if matches(environ.get("HTTP_IF_NONE_MATCH"), etag):
                    return etag, None
                html = app.jinja_env.get_template(FRAGMENT).render(
                    job=job, report=None, oob=True, config=app.config, status_url=status_url
                )
            except Exception as exc:  # noqa: BLE001 - e.g. the database is down
                # Flask runs the poll again and answers with its error page; an outage
                # is logged once by that page, not once per poll here.
                if not dbretry.is_unreachable(exc):
                    log.warning("fast poll failed; the full path answers", exc_info=True)
                return None
        return etag, html.encode()

    def session_data(self, environ: dict) -> Mapping[str, Any] | None:
        """The session, read from its signed cookie as Flask reads it; None if unusable."""
        verified = self.verified(environ.get("HTTP_COOKIE"))
        if verified is None:
            return None
        data, signed_at = verified
        # As the serializer's max_age check: too old, or signed in the future, is refused.
        age = int(time.time()) - signed_at
        if not 0 <= age <= self.app.permanent_session_lifetime.total_seconds():
            return None
        return data

    def _verify(self, cookie_header: str | None) -> tuple[Mapping[str, Any], int] | None:
        """The session in a Cookie header and when it was signed, if its signature holds."""
        app = self.app
        interface = app.session_interface
        cookie = parse_cookie(cookie_header).get(interface.get_cookie_name(app))
        serializer = interface.get_signing_serializer(app)
        if not cookie or serializer is None:
            return None
        try:
            data, signed = serializer.loads(cookie, return_timestamp=True)
        except BadSignature:
            return None
        if not isinstance(data, dict):
            return None
        if data.get("_permanent") and app.config["SESSION_REFRESH_EACH_REQUEST"]:
            return None  # Flask would send the cookie again with a new expiry
        return MappingProxyType(data), int(signed.timestamp())  # kept: read-only
