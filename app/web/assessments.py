"""Assessment pages: the form, submit, the job page, its status fragment, the history."""

import functools

from flask import Blueprint, abort, current_app, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user, login_required

from ..assessment import PlaceAmbiguous, PlaceNotFound
from ..extensions import login_manager
from ..jobs import housekeeping, pipeline, transitions, views
from ..jobs.runner import RunnerBusy
from ..points import ledger
from . import i18n, paging
from .auth import session_user_id
from .forms import AssessmentForm

bp = Blueprint("assessments", __name__, url_prefix="/assessments")

RETRY_AFTER_SECONDS = 10


@bp.get("")
@login_required
def index():
    """List the user's assessments with what each cost."""
    views.settle_user_jobs(current_user.id)
    return render_template(
        "assessments/index.html",
        balance=ledger.balance_snapshot(current_user.id),  # the badges read in it too
        page=paging.current_page(functools.partial(views.history, current_user.id)),
    )


@bp.get("/new")
@login_required
def new():
    """Show the submit form, filled in from the query string (a chosen place, a retry)."""
    # The report's language follows the interface's unless the link chose one (a retry).
    lang = request.args.get("lang") or i18n.language()
    form = AssessmentForm(
        query=request.args.get("query", "")[:200], lang=lang if lang in ("en", "ja") else "en"
    )
    return render_template("assessments/new.html", form=form)


@bp.post("")
def create():
    """Start an assessment and send the browser to its page."""
    # The signed-in id, without loading the user: the INSERT checks the user and the
    # balance itself (a fifth of a submit's time was the user load, bench/RESULTS.md).
    user_id = session_user_id()
    if user_id is None:
        return login_manager.unauthorized()
    housekeeping.trigger(current_app._get_current_object())
    form = AssessmentForm()
    if not form.validate_on_submit():
        return _form_error(form, 400)
    try:
        job_id = pipeline.submit(user_id, form.query.data, form.lang.data)
    except PlaceAmbiguous as exc:
        message = i18n.ambiguous_message(form.query.data, exc.choices)
        return _form_error(form, 400, message, choices=exc.choices)
    except PlaceNotFound as exc:
        message = i18n.not_found_message(exc.template, exc.params)
        return _form_error(form, 400, message, suggestions=exc.suggestions)
    except transitions.NotEnoughPoints:
        message = _(
            "You have no points left, so this assessment cannot start. Nothing was charged. "
            "Ask our support team to add points to your account."
        )
        return _form_error(form, 402, message)
    except transitions.AssessmentInFlight as exc:
        return _form_error(form, 409, _("An assessment is already running."), running=exc.job_id)
    except RunnerBusy:
        response = _form_error(
            form, 503, _("The service is busy right now. Nothing was charged: try again shortly.")
        )
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return redirect(url_for(".show", job_id=job_id), 303)


@bp.get("/<job_id>")
@login_required
def show(job_id: str):
    """Show a job: its live status and, once it succeeded, its report."""
    job = _own_job(job_id, current_user.id)
    report = views.result(job.id, current_user.id) if job.status == "succeeded" else None
    # The top bar shows the balance read with the job, so the two always agree.
    return render_template("assessments/show.html", job=job, report=report, balance=job.balance)


@bp.get("/<job_id>/status")
def status(job_id: str):
    """Render the status fragment that the job page polls."""
    user_id = session_user_id()
    if user_id is None:
        return login_manager.unauthorized()
    housekeeping.trigger(current_app._get_current_object())
    job = _own_job(job_id, user_id)
    # The report arrives out of band once, with the fragment that stops the polling.
    report = None
    if job.status == "succeeded" and request.headers.get("HX-Request"):
        report = views.result(job.id, user_id)
    # Rendered without Flask's context processors: Flask-Login's loads the user row to
    # offer current_user, which cost a quarter of the worker's time under polling.
    fragment = current_app.jinja_env.get_template("partials/_job_status.html")
    return fragment.render(job=job, report=report, oob=True, config=current_app.config)


def _own_job(raw_id: str, user_id: int) -> views.JobView:
    job_id = views.parse_id(raw_id)
    job = views.view(job_id, user_id) if job_id else None
    if job is None:  # another user's job and an unknown id look the same
        abort(404)
    return job


def _form_error(form: AssessmentForm, status: int, message: str | None = None, **extra):
    body = render_template(
        "assessments/new.html",
        form=form,
        error=message,
        poll_seconds=current_app.config["POLL_INTERVAL_SECONDS"],
        **extra,
    )
    return current_app.make_response((body, status))
