"""Device cookies: a browser that signed in to an account before is not braked with strangers.

OWASP's "Slow Down Online Guessing Attacks with Device Cookies": a successful log-in (or
sign-up) gives the browser a signed cookie naming the account (its id), the account's
session generation and a random nonce. A log-in attempt for that account from a browser
holding a valid cookie for it counts toward its own brake, per nonce; every other attempt
(a stranger, the owner on a new browser, or a cookie whose own brake is full) counts
toward the per-address brakes and the account's ceiling across all addresses. So guesses
from an office's shared address, or from many addresses at once, never lock the owner's
usual browser out, and guessing an account has a ceiling however many addresses it comes
from, a stolen cookie included.

Logging out bumps the session generation (app/points/accounts.py: end_sessions), and
that retires every device cookie of the account at once, a thief's too: the log-in's own
user lookup compares it. The browser that logs out gets a fresh one for the new
generation, as it has just proved it is the owner's. The cookie is only a brake's key,
never a credential: it signs nobody in. It is sent to /login only, so the status poll and
every other request carry none of it.
"""

import secrets

from flask import Response, current_app, request
from itsdangerous import BadSignature, URLSafeSerializer

COOKIE = "device"
MAX_AGE = 365 * 24 * 3600  # a year; each log-in gives a fresh one
SALT = "device-cookie"


def _serializer() -> URLSafeSerializer:
    # Old keys too while SECRET_KEY rotates (newest last), as sessions do.
    keys = [*current_app.config["SECRET_KEY_FALLBACKS"], current_app.secret_key]
    return URLSafeSerializer(keys, salt=SALT)


def remember(response: Response, user_id: int, generation: int) -> Response:
    """Give this browser a device cookie for the account (and generation) it signed in to."""
    value = _serializer().dumps({"u": user_id, "g": generation, "n": secrets.token_urlsafe(16)})
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


def nonce(user_id: int | None, generation: int | None) -> str | None:
    """Return the nonce of this browser's device cookie if it is valid for this account now.

    `user_id` and `generation` are the account's as the log-in looked it up (None for an
    email without one): a cookie of another account, or of a generation since logged out
    of, is no device cookie.
    """
    cookie = request.cookies.get(COOKIE)
    if not cookie or user_id is None:
        return None
    try:
        data = _serializer().loads(cookie)
    except BadSignature:
        return None
    if not isinstance(data, dict) or data.get("u") != user_id or data.get("g") != generation:
        return None
    value = data.get("n")
    return value if isinstance(value, str) and value else None
