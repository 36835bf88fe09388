"""Sign up, log in, log out."""

import math
import time
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
from flask_login import current_user, login_required, login_user, logout_user
from limits import parse as parse_limit

from ..extensions import db, login_manager
from ..models import User
from ..points import accounts
from . import i18n
from .errors import MESSAGES
from .forms import LoginForm, SignupForm

bp = Blueprint("auth", __name__)


def session_user_id() -> int | None:
    """Return the signed-in user's id from the signed session, without loading the user.

    For the status fragment, which every open job page polls every couple of seconds
    (loading the user row there cost as much as the whole poll, bench/RESULTS.md), and
    for submit. Their queries are scoped to this id, so ownership is still checked in SQL.
    """
    return user_id_of(session)


def user_id_of(session_data) -> int | None:
    """Return the user id that Flask-Login's login_user() keeps in a session, if any."""
    raw = session_data.get("_user_id")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else None


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
    """Load the signed-in user for Flask-Login."""
    return db.session.get(User, int(user_id))


@bp.route("/signup", methods=["GET", "POST"])
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
            form.email.errors.append(
                _("An account with this email already exists. Log in instead.")
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
            return redirect(url_for("main.dashboard"), 303)
    status = 400 if request.method == "POST" else 200
    return render_template("auth/signup.html", form=form), status


# A brake on password guessing: ten failed log-ins per account in 15 minutes, then 429
# until the window passes. Only failures count, so a user who types it right is never held.
# The limits package keeps the window; it is checked here and not in a hook on every
# request (Flask-Limiter's cost 0.18 ms on each poll of the status fragment).
LOGIN_FAILURES = parse_limit("10 per 15 minutes")


@bp.route("/login", methods=["GET", "POST"])
def login():
    """Sign in with email and password."""
    if current_user.is_authenticated:
        return redirect(_safe_next() or url_for("main.dashboard"))
    form = LoginForm()
    if form.validate_on_submit():
        failures = current_app.extensions["login_failures"]
        account = form.email.data.lower()  # the form strips it
        if not failures.test(LOGIN_FAILURES, "login", account):
            return _too_many_failures(failures, account)
        user = accounts.authenticate(form.email.data, form.password.data)
        if user is not None:
            login_user(user)
            i18n.remember(user)
            return redirect(_safe_next() or url_for("main.dashboard"), 303)
        failures.hit(LOGIN_FAILURES, "login", account)
        form.password.errors.append(_("That email and password do not match an account."))
    status = 400 if request.method == "POST" else 200
    return render_template("auth/login.html", form=form), status


def _too_many_failures(failures, account: str):
    reset = failures.get_window_stats(LOGIN_FAILURES, "login", account).reset_time
    body = render_template("error.html", code=429, message=MESSAGES[429])
    return body, 429, {"Retry-After": str(max(1, math.ceil(reset - time.time())))}


@bp.post("/logout")
@login_required
def logout():
    """Sign out (CSRFProtect has checked the form's token)."""
    logout_user()
    flash(_("You are signed out."), "info")
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
