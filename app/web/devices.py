"""Device cookies: a browser that signed in to an account before is not braked with strangers.

OWASP's "Slow Down Online Guessing Attacks with Device Cookies": a successful log-in (or
sign-up) gives the browser a signed cookie naming the account (by a digest of its email)
and a random nonce. A log-in attempt for that account from a browser holding a valid
cookie for it counts only toward its own brake, per nonce; every other attempt (a
stranger, or the owner on a new browser) counts toward the per-address brakes and the
account's ceiling across all addresses. So guesses from an office's shared address, or
from many addresses at once, never lock the owner's usual browser out, and guessing an
account has a ceiling however many addresses it comes from. The cookie is only a brake's
key, never a credential: it signs nobody in. It is sent to /login only, so the status poll
and every other request carry none of it.
"""

import hashlib
import secrets

from flask import Response, current_app, g, request
from itsdangerous import BadSignature, URLSafeSerializer

COOKIE = "device"
MAX_AGE = 365 * 24 * 3600  # a year; each log-in gives a fresh one
SALT = "device-cookie"


def _serializer() -> URLSafeSerializer:
    # Old keys too while SECRET_KEY rotates (newest last), as sessions do.
    keys = [*current_app.config["SECRET_KEY_FALLBACKS"], current_app.secret_key]
    return URLSafeSerializer(keys, salt=SALT)


def _account(email: str) -> str:
    # The cookie names the account without showing its email to whoever reads the cookie.
    return hashlib.sha256(email.strip().lower().encode("utf-8", "replace")).hexdigest()[:32]


def remember(response: Response, email: str) -> Response:
    """Give this browser a device cookie for the account it just signed in to."""
    value = _serializer().dumps({"a": _account(email), "n": secrets.token_urlsafe(16)})
    response.set_cookie(
        COOKIE,
        value,
        max_age=MAX_AGE,
        path="/login",
        secure=current_app.config["SESSION_COOKIE_SECURE"],
        httponly=True,
        samesite="Lax",
    )
    return response


def nonce() -> str | None:
    """Return the nonce of this browser's device cookie if it is valid for the email posted."""
    if "device_nonce" not in g:
        g.device_nonce = _valid_nonce(request.cookies.get(COOKIE), request.form.get("email"))
    return g.device_nonce


def _valid_nonce(cookie: str | None, email: str | None) -> str | None:
    if not cookie or not isinstance(email, str):
        return None
    try:
        data = _serializer().loads(cookie)
    except BadSignature:
        return None
    if not isinstance(data, dict) or data.get("a") != _account(email):
        return None
    value = data.get("n")
    return value if isinstance(value, str) and value else None


def trusted() -> bool:
    """Tell whether this log-in comes from a browser that signed in to the account before."""
    return nonce() is not None


def stranger() -> bool:
    """Tell whether this log-in comes from a browser without a device cookie for the account."""
    return nonce() is None
