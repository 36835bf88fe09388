"""Sign up, log in, log out."""

import math
import time
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    current_app,
    flash,
    g,
    make_response,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_babel import format_number, ngettext
from flask_babel import gettext as _
from flask_limiter import RateLimitExceeded
from flask_login import current_user, login_required, login_user, logout_user

from ..extensions import db, limiter, login_manager
from ..models import User
from ..points import accounts
from . import devices, i18n
from .forms import LoginForm, PreferencesForm, SignupForm

bp = Blueprint("auth", __name__)


def session_user_id() -> int | None:
    """Return the signed-in user's id from the signed session, without loading the user."""
    identity = session_identity()
    return identity[0] if identity else None


def session_identity() -> tuple[int, int] | None:
    """Return the signed-in (user id, session generation), without loading the user.

    For the status fragment, which every open job page polls every couple of seconds
    (loading the user row there cost as much as the whole poll, bench/RESULTS.md), and
    for submit. Their queries are scoped to this id and check the generation themselves,
    so ownership and logout are still checked in SQL.
    """
    return identity_of(session)


def identity_of(session_data) -> tuple[int, int] | None:
    """Return the (user id, session generation) that login_user() keeps in a session."""
    return parse_identity(session_data.get("_user_id"))


def parse_identity(raw) -> tuple[int, int] | None:
    """Parse User.get_id()'s "id:generation".

    Logout bumps the user's generation, so every copy of every cookie issued before it
    is dead. One generation per user, not a row per session: the poll checks it in the
    join it already makes on the users row, where a session table would cost a lookup on
    every poll. So logging out signs the user out on all devices (the account page says
    so). A bare id, from a session signed before generations existed, is generation 0:
    valid until the user's first logout, so a deploy signs nobody out.
    """
    if not isinstance(raw, str):
        return None
    user_id, _, generation = raw.partition(":")
    if not (user_id.isascii() and user_id.isdigit()):
        return None
    if generation and not (generation.isascii() and generation.isdigit()):
        return None
    return int(user_id), int(generation or 0)


@login_manager.unauthorized_handler
def unauthorized():
    """Send a signed-out browser to the login page, and back here afterwards."""
    if request.headers.get("HX-Request"):
        # A poll from a page whose session ended: move the whole page, not the fragment.
        try:
            back = urlsplit(request.headers.get("HX-Current-URL", "")).path or "/"
        except ValueError:  # a malformed header is no reason for a 500
            back = "/"
        flash(_("Your session ended. Log in to see your assessment again."), "info")
        response = make_response("", 401)
        response.headers["HX-Redirect"] = url_for("auth.login", next=back)
        return response
    flash(_("Log in to continue."), "info")
    return redirect(url_for("auth.login", next=request.path))


@login_manager.user_loader
def load_user(user_id: str) -> User | None:
    """Load the signed-in user for Flask-Login, if their session was not revoked."""
    identity = parse_identity(user_id)
    user = db.session.get(User, identity[0]) if identity else None
    if user is None or user.session_generation != identity[1]:
        return None  # a user deleted, or logged out since this session began
    return user


# Brakes on password guessing and on sign-up floods, by client address. Behind a proxy
# that address is the proxy's (request.remote_addr): put werkzeug's ProxyFix in front
# only when a proxy you trust sets X-Forwarded-For. Only the POSTs are limited, and
# only failures count toward the log-in brakes, so a user who types it right is never
# held. A browser with a device cookie for the account (devices.py) has a brake of its
# own; every other one counts per account and address, per address, and toward the
# account's ceiling across addresses: a stranger's guesses never lock out the owner's
# usual browser, and many addresses together still get a bounded number of guesses.
def _client() -> str:
    return request.remote_addr or "unknown"


def _account() -> str:
    # As the form reads it: stripped, and matched in any letter case. Never empty: a
    # limit whose key is empty is skipped (and logged) by Flask-Limiter.
    return (request.form.get("email") or "").strip().lower() or "-"


def _account_at_client() -> str:
    return f"{_account()}|{_client()}"


def _device() -> str:
    return f"{_account()}|{devices.nonce()}"


def _limit(name: str):
    return lambda: current_app.config[name]


def _login_failed(response) -> bool:
    return g.get("login_failed", False)


def _signed_up_or_taken(response) -> bool:
    # An account created, or a sign-up naming an email already in use: both tell the
    # client something about that address, so both count. A form error does not.
    return g.get("signed_up", False) or g.get("email_taken", False)


@bp.route("/signup", methods=["GET", "POST"])
@limiter.limit(
    _limit("SIGNUP_RATE_LIMIT"),
    key_func=_client,
    methods=["POST"],
    deduct_when=_signed_up_or_taken,
)
def signup():
    """Create an account and sign in."""
    if current_user.is_authenticated:
        return redirect(url_for("main.dashboard"))
    form = SignupForm()
    if form.validate_on_submit():
        try:
            user = accounts.create_user(
                form.email.data, form.password.data, current_app.config["SIGNUP_POINTS"]
            )
        except accounts.EmailTaken:
            # Counted by the sign-up brake, as an account created is. The words do not
            # say that an account exists; README, "Sign-up and log-in brakes", says why
            # a sign-up cannot hide it entirely and what the brake does about that.
            g.email_taken = True
            form.email.errors.append(
                _(
                    "This email cannot be used for a new account."
                    " If you signed up with it before, log in instead."
                )
            )
        else:
            g.signed_up = True
            login_user(user)
            i18n.remember(user)
            flash(
                ngettext(
                    "Welcome! You have %(points)s point to spend.",
                    "Welcome! You have %(points)s points to spend.",
                    user.point_balance,
                    points=format_number(user.point_balance),
                ),
                "success",
            )
            return devices.remember(redirect(url_for("main.dashboard"), 303), user.email)
    status = 400 if request.method == "POST" else 200
    return render_template("auth/signup.html", form=form), status


@bp.route("/login", methods=["GET", "POST"])
@limiter.limit(
    _limit("LOGIN_RATE_LIMIT"),
    key_func=_account_at_client,
    methods=["POST"],
    deduct_when=_login_failed,
    exempt_when=devices.trusted,
    scope="login-account",
)
@limiter.limit(
    _limit("LOGIN_ADDRESS_RATE_LIMIT"),
    key_func=_client,
    methods=["POST"],
    deduct_when=_login_failed,
    exempt_when=devices.trusted,
    scope="login-address",
)
@limiter.limit(
    _limit("LOGIN_ACCOUNT_RATE_LIMIT"),
    key_func=_account,
    methods=["POST"],
    deduct_when=_login_failed,
    exempt_when=devices.trusted,
    scope="login-account-everywhere",
)
@limiter.limit(
    _limit("LOGIN_DEVICE_RATE_LIMIT"),
    key_func=_device,
    methods=["POST"],
    deduct_when=_login_failed,
    exempt_when=devices.stranger,
    scope="login-device",
)
def login():
    """Sign in with email and password."""
    if current_user.is_authenticated:
        return redirect(_safe_next() or url_for("main.dashboard"))
    form = LoginForm()
    if form.validate_on_submit():
        user = accounts.authenticate(form.email.data, form.password.data)
        if user is not None:
            login_user(user)
            i18n.remember(user)
            response = redirect(_safe_next() or url_for("main.dashboard"), 303)
            return devices.remember(response, user.email)
        g.login_failed = True
        form.password.errors.append(_("That email and password do not match an account."))
    status = 400 if request.method == "POST" else 200
    return render_template("auth/login.html", form=form), status


@bp.app_errorhandler(RateLimitExceeded)
def too_many_attempts(exc: RateLimitExceeded):
    """Say when to try again, on the page and in Retry-After."""
    limit = limiter.current_limit
    # The window's exact end: the library's reset_at is rounded up to the next whole second,
    # which can name a wait one second longer than the window itself (901 s of a 15-minute one).
    wait = max(1, math.ceil(limit.window.reset_time - time.time())) if limit else 60
    minutes = math.ceil(wait / 60)
    message = (
        ngettext(
            "Too many payment pages opened. Nothing was charged. Try again in %(num)d minute.",
            "Too many payment pages opened. Nothing was charged. Try again in %(num)d minutes.",
            minutes,
        )
        if request.endpoint == "payments.buy"
        else ngettext(
            "Too many failed attempts. Nothing was changed. Try again in %(num)d minute.",
            "Too many failed attempts. Nothing was changed. Try again in %(num)d minutes.",
            minutes,
        )
    )
    body = render_template("error.html", code=429, message=message)
    return body, 429, {"Retry-After": str(wait)}


@bp.post("/logout")
@login_required
def logout():
    """Sign out on every device (CSRFProtect has checked the form's token)."""
    return _sign_out(_("You are signed out."))


def _sign_out(message: str):
    # One session generation per user: ending this session ends them all.
    accounts.end_sessions(current_user.id)
    logout_user()
    flash(message, "info")
    return redirect(url_for("auth.login"), 303)


def _safe_next() -> str | None:
    target = request.args.get("next", "")
    # Only local paths: an open redirect would hand our users to anyone. Browsers drop
    # tabs and newlines inside a URL ("/\t/evil.example" is "//evil.example") and read a
    # backslash as a slash, so a target with any of them, or a space, is refused whole;
    # a newline could not go into a Location header anyway.
    if any(ch == "\\" or ord(ch) <= 32 or ord(ch) == 127 for ch in target):
        return None
    if target.startswith("/") and not target.startswith("//"):
        return target
    return None


@bp.get("/account")
@login_required
def account():
    """Show the account: its language and time zone, and the way to sign out everywhere."""
    return render_template("auth/account.html", form=preferences_form())


def preferences_form() -> PreferencesForm:
    """Return the language and time zone form, filled in with the current choice."""
    return PreferencesForm(lang=i18n.language(), timezone=i18n.select_timezone())


@bp.post("/account/logout-everywhere")
@login_required
def logout_everywhere():
    """Revoke every session of the user, this one included."""
    return _sign_out(_("You are signed out on every device."))
