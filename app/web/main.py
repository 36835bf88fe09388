"""The dashboard (the balance, the latest changes, recent assessments) and the point history."""

import functools
from datetime import date

from flask import Blueprint, current_app, redirect, render_template, url_for
from flask_babel import to_user_timezone
from flask_login import current_user, login_required

from ..jobs import estimate, views
from ..points import expiry, ledger
from . import history, paging

bp = Blueprint("main", __name__)

DASHBOARD_ENTRIES = 10  # the latest changes; /points has them all


@bp.get("/")
def dashboard():
    """Show the signed-in user's balance and ledger, or the welcome page."""
    if not current_user.is_authenticated:
        return render_template("welcome.html")
    views.settle_user_jobs(current_user.id)
    return render_template(
        "dashboard.html",
        # The balance, its ledger rows and the badges: one moment.
        balance=ledger.balance_snapshot(current_user.id),
        expiring=expiring(current_user.id),
        entries=ledger.history(current_user.id, limit=DASHBOARD_ENTRIES),
        recent=history.assessments(current_user.id, limit=5),
        typical_seconds=estimate.typical_seconds(),
        lapsing=_lapsing(),
    )


@bp.get("/favicon.ico")
def favicon():
    """Send a browser that asks the old way to the icon the pages name (base.html).

    A redirect and not a page, so the answer is cheap and renders nothing. What keeps it
    (and every other request a page's first click races) from writing the session's cookie
    is auth.anonymous_sessions_start_not_fresh: Flask-Login reads the session on every
    request but no longer has anything to write.
    """
    return redirect(url_for("static", filename="favicon.svg"), 301)


@bp.get("/points")
@login_required
def points():
    """Show every change to the user's balance, a page at a time."""
    return render_template(
        "points.html",
        balance=ledger.balance_snapshot(current_user.id),
        expiring=expiring(current_user.id),
        page=paging.current_page(functools.partial(ledger.history, current_user.id)),
        lapsing=_lapsing(),
    )


def expiring(user_id: int) -> list[tuple[date, int]]:
    """Return how many of the user's points expire on each day, on the reader's calendar.

    Read after balance_snapshot, in its snapshot: the dates add up to the balance shown.
    """
    days: dict[date, int] = {}
    for expires_at, points in expiry.held(user_id, current_app.config["POINTS_VALID_DAYS"]):
        day = to_user_timezone(expires_at).date()
        days[day] = days.get(day, 0) + points
    return sorted(days.items())


def _lapsing() -> int:
    return expiry.lapsing(current_user.id, current_app.config["POINTS_VALID_DAYS"])


@bp.app_context_processor
def demo_data() -> dict[str, object]:
    """Tell every page whether reports are built from demonstration data, before anyone pays,
    and how that was chosen (provider_choice: the start-up probe's outcome)."""
    return {
        "demo_data": bool(current_app.extensions["layer_provider"].is_demo),
        "provider_choice": current_app.extensions.get("provider_choice") or {},
    }


@bp.after_app_request
def no_store_pages(response):
    """Keep pages out of the browser's cache, so Back never shows a stale balance.

    A live job's fragment (it has an ETag) is kept, but asked about again on every poll.
    """
    if response.mimetype == "text/html" and "ETag" not in response.headers:
        response.headers["Cache-Control"] = "no-store"
    return response
