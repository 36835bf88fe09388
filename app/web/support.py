"""The support console: open incidents, and settling the points they are about."""

import uuid
from functools import wraps

from flask import Blueprint, abort, current_app, flash, redirect, render_template, url_for
from flask_babel import gettext as _
from flask_login import current_user, login_required

from ..points import accounts, billing, grants, incidents, ledger
from .forms import AdjustPointsForm, ReasonForm

bp = Blueprint("support", __name__, url_prefix="/support")


def support_required(view):
    """Let only signed-in support staff through; others get 403."""

    @wraps(view)
    @login_required
    def wrapped(*args, **kwargs):
        if not current_user.is_support:
            abort(403)
        return view(*args, **kwargs)

    return wrapped


@bp.get("")
@support_required
def index(adjust_form: AdjustPointsForm | None = None, status: int = 200):
    """List open incidents, each with its user's ledger rows for the job."""
    open_rows = incidents.open_incidents()
    entries = {row.id: ledger.entries_for_job(row.job_id) for row in open_rows if row.job_id}
    return render_template(
        "support/index.html",
        incidents=open_rows,
        entries=entries,
        resolved=incidents.recently_resolved(),
        form=ReasonForm(),
        adjust_form=adjust_form or AdjustPointsForm(formdata=None),
        adjustments=grants.recent(),
        waiting=grants.waiting(),
        approval_above=current_app.config["SUPPORT_GRANT_APPROVAL_POINTS"],
        grant_window_days=grants.GRANT_WINDOW_DAYS,
    ), status


@bp.post("/points")
@support_required
def adjust_points():
    """Grant points to a user, or take some back, as a row naming this operator and why."""
    form = AdjustPointsForm()
    if not form.validate_on_submit():
        for error in form.nonce.errors:  # a hidden field: said at the top, and a fresh one
            flash(str(error), "error")
            form.nonce.data = uuid.uuid4().hex
        return index(form, 400)
    user = accounts.find_by_email(form.email.data)
    if user is None:
        form.email.errors.append(_("No user has this email address."))
        return index(form, 400)
    try:
        balance = grants.adjust(
            user.id,
            form.amount.data,
            current_user.id,
            form.reason.data,
            form.nonce.data,
            approval_above=current_app.config["SUPPORT_GRANT_APPROVAL_POINTS"],
        )
    except grants.OwnAccount:
        form.email.errors.append(_("Support cannot change the points of its own account."))
        return index(form, 403)
    except grants.NeedsApproval:
        flash(
            _(
                "Grants above %(limit)s points to one account within %(days)s days need a"
                " second support user: this one waits for their approval, and nothing was"
                " added yet.",
                limit=current_app.config["SUPPORT_GRANT_APPROVAL_POINTS"],
                days=grants.GRANT_WINDOW_DAYS,
            ),
            "info",
        )
        return redirect(url_for(".index"), 303)
    except grants.AlreadyApplied:
        flash(_("This change was already recorded: nothing was changed again."), "info")
        return redirect(url_for(".index"), 303)
    except ledger.InsufficientPoints:
        form.amount.errors.append(_("That would take the balance below zero: nothing was changed."))
        return index(form, 409)
    flash(
        _(
            "%(email)s: %(amount)+d points, balance %(balance)s.",
            email=user.email,
            amount=form.amount.data,
            balance=balance,
        ),
        "success",
    )
    return redirect(url_for(".index"), 303)


@bp.post("/grants/<int:request_id>/approve")
@support_required
def approve_grant(request_id: int):
    """Approve another operator's grant above the limit: its ledger row names you both."""
    outcome = grants.approve(request_id, current_user.id)
    if outcome == "unknown":
        abort(404)
    if outcome == "own":
        flash(_("A second support user must approve this grant, not you."), "error")
        return index(None, 403)
    if outcome == "already":
        flash(_("This grant was already approved: nothing was added again."), "info")
    else:
        flash(_("Grant approved: the points were added."), "success")
    return redirect(url_for(".index"), 303)


@bp.post("/incidents/<int:incident_id>/refund")
@support_required
def refund(incident_id: int):
    """Refund the job's point (idempotent) and resolve the incident."""
    return _settle(incident_id, refund=True)


@bp.post("/incidents/<int:incident_id>/no-refund")
@support_required
def no_refund(incident_id: int):
    """Record that no refund is due, with the reason, and resolve the incident."""
    return _settle(incident_id, refund=False)


@bp.post("/incidents/<int:incident_id>/settled")
@support_required
def settled(incident_id: int):
    """Resolve a payment's incident, once its points and money are settled, with why."""
    incident = incidents.get(incident_id)
    if incident is None or incident.job_id is not None:
        abort(404)
    form = ReasonForm()
    if not form.validate_on_submit():
        flash(" ".join(map(str, form.reason.errors)) or _("Say why, for the record."), "error")
        return redirect(url_for(".index"), 303)
    if incidents.resolve_payment(incident_id, current_user.id, form.reason.data.strip()):
        flash(_("Incident %(id)s resolved.", id=incident_id), "success")
    else:
        flash(_("Incident %(id)s was already resolved.", id=incident_id), "error")
    return redirect(url_for(".index"), 303)


def _settle(incident_id: int, refund: bool):
    incident = incidents.get(incident_id)
    if incident is None or incident.job_id is None:
        abort(404)
    form = ReasonForm()
    if not form.validate_on_submit():
        flash(" ".join(map(str, form.reason.errors)) or _("Say why, for the record."), "error")
        return redirect(url_for(".index"), 303)
    settled = billing.settle_by_support(
        incident_id, incident.job_id, current_user.id, refund, form.reason.data.strip()
    )
    if settled:
        flash(_("Incident %(id)s resolved.", id=incident_id), "success")
    else:
        flash(
            _("Incident %(id)s was already resolved, or its job did not fail.", id=incident_id),
            "error",
        )
    return redirect(url_for(".index"), 303)
