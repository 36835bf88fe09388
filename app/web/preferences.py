"""The interface's language and time zone: the switch on every page and the account's choice.

The choice's form is on the account page (/account); /preferences shows that same page.
"""

from flask import Blueprint, abort, flash, redirect, render_template, request, session, url_for
from flask_babel import gettext as _
from flask_babel import refresh
from flask_login import current_user, login_required

from ..points import accounts
from .auth import _safe_next, preferences_form
from .forms import LanguageForm, PasswordForm

bp = Blueprint("preferences", __name__)


@bp.post("/language")
def language():
    """Switch the interface's language, keep it, and go back to the page."""
    form = LanguageForm()
    if not form.validate_on_submit():
        abort(400)
    session["lang"] = form.lang.data
    if current_user.is_authenticated:
        accounts.set_preferences(current_user.id, locale=form.lang.data)
    return redirect(_safe_next() or url_for("main.dashboard"), 303)


@bp.route("/preferences", methods=["GET", "POST"])
@login_required
def edit():
    """Show and save the account's language and time zone."""
    form = preferences_form()
    if form.validate_on_submit():
        accounts.set_preferences(
            current_user.id, locale=form.lang.data, timezone=form.timezone.data
        )
        session["lang"], session["tz"] = form.lang.data, form.timezone.data
        refresh()  # the message below is in the language just chosen
        flash(_("Your preferences are saved."), "success")
        return redirect(url_for("auth.account"), 303)
    status = 400 if request.method == "POST" else 200
    body = render_template("auth/account.html", form=form, password_form=PasswordForm())
    return body, status
