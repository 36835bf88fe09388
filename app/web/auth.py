"""Sign up, log in, log out."""

import math
import time
from datetime import date
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    current_app,
    flash,
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
from . import brakes, devices, i18n, timezones
from .forms import LoginForm, PasswordForm, PreferencesForm, SignupForm

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


@bp.after_app_request
def anonymous_sessions_start_not_fresh(response):
    """Make an anonymous session not fresh in the response that writes it anyway.

    Flask-Login marks a session not fresh (its basic session protection) the first time a
    request reads the user from a session that holds anything, such as the CSRF token the
    first page stored; that request writes the session. Left to whichever request came
    next, it was a browser's own request beside the reader's first click (an icon, any
    404), sent with the session from before the click and answered after it: its cookie
    took a language switch back. Marked here, no later request has anything to write.
    """
    if session.modified and "_user_id" not in session and session.get("_fresh") is not False:
        session["_fresh"] = False
    return response


@login_manager.user_loader
def load_user(user_id: str) -> User | None:
    """Load the signed-in user for Flask-Login, if their session was not revoked."""
    identity = parse_identity(user_id)
    user = db.session.get(User, identity[0]) if identity else None
    if user is None or user.session_generation != identity[1]:
        return None  # a user deleted, or logged out since this session began
    return user


# Brakes on password guessing and on sign-up floods, by client address (behind a proxy,
# see app/web/proxies.py). Only valid POSTs are counted, each BEFORE its password check or
# account creation (brakes.take: atomic, so attempts sent at once cannot all pass a test
# of the count), and a log-in that succeeds is given back: a user who types it right is
# never held. A browser with a device cookie for the account (devices.py) has a brake of
# its own; every other one, and one whose own brake is full, counts per account and
# address, per address, and toward the account's ceiling across addresses: a stranger's
# guesses never lock out the owner's usual browser, and many addresses together (or a
# stolen cookie) still get a bounded number of guesses.
def _client() -> str:
    return request.remote_addr or "unknown"


def _account() -> str:
    # As the form reads it: stripped, and matched in any letter case.
    return (request.form.get("email") or "").strip().lower() or "-"


def _stranger_brakes() -> tuple[tuple[str, str, str], ...]:
    config = current_app.config
    return (
        (config["LOGIN_RATE_LIMIT"], "login-account", f"{_account()}|{_client()}"),
        (config["LOGIN_ADDRESS_RATE_LIMIT"], "login-address", _client()),
        (config["LOGIN_ACCOUNT_RATE_LIMIT"], "login-account-everywhere", _account()),
    )


def _take_login_attempt(user: User | None) -> brakes.Taken:
    device = devices.nonce(user.id, user.session_generation) if user else None
    if device is not None:
        limit = current_app.config["LOGIN_DEVICE_RATE_LIMIT"]
        taken = brakes.take((limit, "login-device", f"{_account()}|{device}"))
        if not taken.refused:
            return taken
        # OWASP: a device cookie out of its own guesses is a stranger's (its thief's).
    return brakes.take(*_stranger_brakes())


@bp.route("/signup", methods=["GET", "POST"])
def signup():
    """Create an account and sign in."""
    if current_user.is_authenticated:
        return redirect(url_for("main.dashboard"))
    form = SignupForm()
    if form.validate_on_submit():
        # Counted before the account is made: an account created, and a sign-up naming an
        # email already in use, both tell the client something about that address. A form
        # error counts nothing.
        taken = brakes.take((current_app.config["SIGNUP_RATE_LIMIT"], "signup", _client()))
        if taken.refused:
            return _too_many(taken.wait)
        try:
            user = accounts.create_user(
                form.email.data, form.password.data, current_app.config["SIGNUP_POINTS"]
            )
        except accounts.EmailTaken:
            # The words do not say that an account exists; README, "Sign-up and log-in
            # brakes", says why a sign-up cannot hide it entirely and what the brake does.
            form.email.errors.append(
                _(
                    "This email cannot be used for a new account."
                    " If you signed up with it before, log in instead."
                )
            )
        else:
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
            response = redirect(url_for("main.dashboard"), 303)
            return devices.remember(response, user.id, user.session_generation)
    status = 400 if request.method == "POST" else 200
    return render_template("auth/signup.html", form=form), status


@bp.route("/login", methods=["GET", "POST"])
def login():
    """Sign in with email and password."""
    if current_user.is_authenticated:
        return redirect(_safe_next() or url_for("main.dashboard"))
    form = LoginForm()
    if form.validate_on_submit():
        user = accounts.find_by_email(form.email.data)
        taken = _take_login_attempt(user)
        if taken.refused:
            return _too_many(taken.wait)  # even with the right password, unchecked
        if accounts.password_matches(user, form.password.data):
            brakes.give_back(taken)
            login_user(user)
            i18n.remember(user)
            response = redirect(_safe_next() or url_for("main.dashboard"), 303)
            return devices.remember(response, user.id, user.session_generation)
        form.password.errors.append(_("That email and password do not match an account."))
    status = 400 if request.method == "POST" else 200
    return render_template("auth/login.html", form=form), status


@bp.app_errorhandler(RateLimitExceeded)
def too_many_attempts(exc: RateLimitExceeded):
    """Say when to try again, on the page and in Retry-After."""
    limit = limiter.current_limit
    # The window's exact end: the library's reset_at is rounded up to the next whole second,
    # which can name a wait one second longer than the window itself (901 s of a 15-minute one).
    return _too_many(max(1, math.ceil(limit.window.reset_time - time.time())) if limit else 60)


def _too_many(wait: int):
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
    user_id = current_user.id
    generation = accounts.end_sessions(user_id)
    logout_user()
    flash(message, "info")
    # Every device cookie of the account went with the sessions; this browser, signed in
    # until now, is the owner's and keeps one.
    return devices.remember(redirect(url_for("auth.login"), 303), user_id, generation)


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
    return render_template(
        "auth/account.html", form=preferences_form(), password_form=PasswordForm()
    )


@bp.post("/account/password")
@login_required
def change_password():
    """Change the password, given the current one; every other session is signed out."""
    form = PasswordForm()
    if form.validate_on_submit():
        # The current password is guessed no faster than a log-in's (brakes.py).
        limit = current_app.config["LOGIN_RATE_LIMIT"]
        taken = brakes.take((limit, "password-change", str(current_user.id)))
        if taken.refused:
            return _too_many(taken.wait)
        user = current_user._get_current_object()
        if not accounts.password_matches(user, form.current_password.data):
            form.current_password.errors.append(_("That is not your current password."))
        else:
            brakes.give_back(taken)
            user = accounts.change_password(user.id, form.new_password.data)
            login_user(user)  # this session carries the new generation; the others are dead
            flash(_("Your password is changed. Every other session is signed out."), "success")
            return redirect(url_for("auth.account"), 303)
    body = render_template("auth/account.html", form=preferences_form(), password_form=form)
    return body, 400


def preferences_form() -> PreferencesForm:
    """Return the language and time zone form, filled in with the current choice.

    The zones are offered in the reader's language, Japan's and the common ones first.
    """
    form = PreferencesForm(lang=i18n.language(), timezone=i18n.select_timezone())
    groups = dict(timezones.choices(i18n.language(), date.today()))
    current = i18n.select_timezone()
    if not any(zone == current for group in groups.values() for zone, _ in group):
        first = next(iter(groups))  # a zone saved before the list was curated stays choosable
        groups[first] = [(current, current), *groups[first]]
    form.timezone.choices = groups
    return form


@bp.post("/account/logout-everywhere")
@login_required
def logout_everywhere():
    """Revoke every session of the user, this one included."""
    return _sign_out(_("You are signed out on every device."))
