"""Security headers and cookie flags: one definition for Flask's responses and the fast poll.

Flask-Talisman sets them on every response Flask makes (pages, fragments, error pages,
static files). The fast poll (poll.py) answers before Flask, so it sends the same
headers, computed once here from the same Talisman, not a copy that could drift.
"""

from flask import Flask, Response
from flask_talisman import Talisman

# Strict: no inline script or style anywhere, so injected markup cannot run. htmx works
# under it with its indicator styles turned off (base.html's htmx-config).
CSP = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    # A report's map carries its pictures (the base map, the zones as read) in the report
    # itself, as data: URIs, so a saved or printed report needs nothing from the server.
    # Images cannot run script; script-src and style-src stay 'self' alone.
    "img-src": "'self' data:",
    "frame-ancestors": "'none'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
}

talisman = Talisman()


def init_app(app: Flask) -> None:
    """Set the headers on every Flask response and the cookies' flags."""
    secure = app.config["SESSION_COOKIE_SECURE"]
    app.config["REMEMBER_COOKIE_SECURE"] = secure
    app.config["REMEMBER_COOKIE_SAMESITE"] = "Lax"
    talisman.init_app(
        app,
        # `make run` serves plain http on 127.0.0.1; TLS belongs to the proxy in front.
        force_https=False,
        # HSTS only where the request came over https (Talisman checks): the fast poll
        # never sends it, which is harmless, as pages carry it.
        strict_transport_security=secure,
        session_cookie_secure=secure,
        session_cookie_samesite="Lax",
        content_security_policy=CSP,
        frame_options="DENY",
        referrer_policy="same-origin",
    )
    app.extensions["security_headers"] = _computed(app)


def _computed(app: Flask) -> list[tuple[str, str]]:
    # The headers Talisman puts on a plain http response, computed once for the fast poll.
    with app.test_request_context("/"):
        response = talisman._set_response_headers(Response())
    return [(k, v) for k, v in response.headers.items() if k not in ("Content-Type",)]
