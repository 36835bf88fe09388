"""Error pages in the product's look, for every status a user can meet."""

import io
import math

import psycopg
from flask import Flask, Request, current_app, render_template
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_wtf.csrf import CSRFError
from sqlalchemy import exc as sa_exc
from werkzeug.exceptions import (
    HTTPException,
    InternalServerError,
    RequestEntityTooLarge,
    SecurityError,
)
from werkzeug.utils import cached_property

from ..database import dbretry

# What a page meets when the database cannot be reached, raised by its own query or by
# Flask-Login loading the user while a template renders.
DATABASE_ERRORS = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)

MESSAGES = {
    400: _l("The request could not be understood."),
    403: _l("You do not have access to this page."),
    404: _l("There is nothing here. It may belong to another account, or the link is wrong."),
    405: _l("That action is not allowed here."),
    409: _l("That conflicts with something already in progress."),
    413: _l("That request is too large."),
    429: _l("Too many failed attempts. Wait a few minutes, then try again."),
    500: _l("Something went wrong on our side. Nothing was charged for this request."),
    503: _l("The service is busy. Try again shortly."),
}


class LimitedRequest(Request):
    """A request whose chunked body over MAX_CONTENT_LENGTH is a 413, as a sized one is.

    Werkzeug stops reading a chunked body at the limit and hands on what it read, so the
    form or the webhook saw a cut body (a 400, or a signature that did not match). The
    body is read here up to one byte past the limit: more is too large.
    """

    @cached_property
    def stream(self):
        limit = self.max_content_length
        if self.content_length is not None or limit is None:
            return super().stream
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return super().stream
        raw, body = self.environ["wsgi.input"], bytearray()
        while len(body) <= limit:
            chunk = raw.read(min(65536, limit + 1 - len(body)))
            if not chunk:
                return io.BytesIO(bytes(body))
            body += chunk
        raise RequestEntityTooLarge()


def init_app(app: Flask) -> None:
    """Register the error handlers."""
    app.request_class = LimitedRequest

    @app.errorhandler(CSRFError)
    def csrf_error(exc: CSRFError):
        return _page(400, _("Your form expired or was not sent from this site. Reload and retry."))

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        if exc.code is None or exc.code < 400:
            return exc
        return _page(exc.code, MESSAGES.get(exc.code, exc.description))

    @app.errorhandler(SecurityError)
    def untrusted_host(exc: SecurityError):
        # A Host that TRUSTED_HOSTS refuses: no URL can be built for it, so no page either.
        return current_app.response_class(
            str(MESSAGES[400]), 400, mimetype="text/plain", headers={"Cache-Control": "no-store"}
        )

    @app.errorhandler(InternalServerError)
    def server_error(exc):
        return _page(500, MESSAGES[500])

    for error in DATABASE_ERRORS:
        app.register_error_handler(error, unavailable)


def unavailable(exc: Exception):
    """Answer 503 with Retry-After from a page that needs no database.

    A job page's poll gets it too: htmx does not swap an error response, so the page
    keeps its fragment, shows its connection note and polls again on its trigger.
    """
    dbretry.outage.failed(exc)  # logs the outage once, not each request's traceback
    retry_after = max(1, math.ceil(current_app.config["POLL_INTERVAL_SECONDS"]))
    # Not render_template: its context processors include Flask-Login's, which loads
    # the signed-in user from the database.
    html = current_app.jinja_env.get_template("unavailable.html").render(retry_after=retry_after)
    return html, 503, {"Retry-After": str(retry_after), "Cache-Control": "no-store"}


def _page(code: int, message: str):
    try:
        return render_template("error.html", code=code, message=message), code
    except DATABASE_ERRORS as exc:  # the top bar loads the user: no database, no page
        return unavailable(exc)
