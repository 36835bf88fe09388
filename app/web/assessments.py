"""Assessment pages: the form, submit, the job page, its status fragment, the history."""

import functools
import json
import re
import uuid

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_babel import gettext as _
from flask_login import current_user, login_required

from ..assessment import PlaceAmbiguous, PlaceNotFound
from ..assessment.job import AlreadyReported
from ..assessment.place import resolver
from ..extensions import login_manager
from ..jobs import pipeline, transitions, views
from ..jobs.runner import RunnerBusy
from ..points import accounts, expiry, ledger
from . import history, i18n, paging, poll
from .auth import session_identity
from .forms import AssessmentForm

bp = Blueprint("assessments", __name__, url_prefix="/assessments")

RETRY_AFTER_SECONDS = 10


@bp.get("")
@login_required
def index():
    """List the user's assessments with what each cost, all or those of one outcome."""
    outcome = request.args.get("outcome") or None
    if outcome is not None and outcome not in views.OUTCOME_SQL:
        abort(400)
    views.settle_user_jobs(current_user.id)
    fetch = functools.partial(history.assessments, current_user.id, outcome=outcome)
    return render_template(
        "assessments/index.html",
        balance=ledger.balance_snapshot(current_user.id),  # the badges read in it too
        page=paging.current_page(fetch),
        outcome=outcome,
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
    # After a choice: what the user typed, shown beside the place it became.
    return render_template(
        "assessments/new.html",
        form=form,
        typed=request.args.get("typed", "")[:200],
        preview=resolver.preview(form.query.data) if form.query.data else None,
        # Back to the form mid-job: the form names the job running, its time left, and
        # says when it ends (partials/_in_flight.html).
        running=_running(transitions.in_flight_job(current_user.id)),
    )


@bp.get("/<job_id>/in-flight")
@login_required
def in_flight(job_id: str):
    """Say on the form whether the job that kept it waiting still runs (polled by it)."""
    return render_template("partials/_in_flight.html", running=_own_job(job_id, current_user.id))


def _running(job_id: uuid.UUID | None) -> views.JobView | None:
    return views.view(job_id, current_user.id) if job_id else None


@bp.get("/place")
@login_required
def place():
    """Name the place a query would assess, before any point is spent (the form's preview)."""
    return render_template(
        "partials/_place_preview.html", preview=resolver.preview(request.args.get("query", ""))
    )


@bp.app_template_filter("place_query")
def place_query(area) -> str:
    """Return the words a choice fills the form with: readable, and naming only that area."""
    return resolver.query_for(area)


@bp.post("")
def create():
    """Start an assessment and send the browser to its page."""
    # The signed-in id, without loading the user: the INSERT checks the balance itself
    # (a fifth of a submit's time was the user load, bench/RESULTS.md).
    identity = session_identity()
    if identity is None:
        return login_manager.unauthorized()
    user_id, generation = identity
    # A session revoked by logout is sent to log in before anything reads the user's
    # data: whatever it posts, the same answer (no 500 of a form page without a user,
    # and no telling a place with a report from one without). One primary-key read.
    if not accounts.session_alive(user_id, generation):
        return _session_ended()
    form = AssessmentForm()
    if not form.validate_on_submit():
        return _form_error(form, 400)
    try:
        job_id = pipeline.submit(
            user_id,
            form.query.data,
            form.lang.data,
            generation,
            # "yes", or the code of the one area the reader was warned about.
            confirmed=True if form.confirm.data == "yes" else (form.confirm.data or False),
        )
    except AlreadyReported as exc:
        return _form_error(form, 409, None, existing=exc.job_id, existing_lang=exc.lang)
    except PlaceAmbiguous as exc:
        message = i18n.place_message(exc)
        return _form_error(form, 400, message, choices=exc.choices)
    except PlaceNotFound as exc:
        message = i18n.place_message(exc)
        return _form_error(form, 400, message, suggestions=exc.suggestions, matched=exc.total)
    except transitions.NotEnoughPoints:
        # The INSERT also refused a revoked session or a deleted user: ask only now.
        if not accounts.session_alive(user_id, generation):
            return _session_ended()
        return _form_error(form, 402, no_points=True)  # the form says it, once
    except transitions.AssessmentInFlight as exc:
        # Reloading this answer would post the form again: the page's address becomes the
        # form's, filled in (static/js/no-resend.js), so a reload only reads it.
        again = url_for(".new", query=form.query.data, lang=form.lang.data)
        running = views.view(exc.job_id, user_id)  # named in the notice, polled till it ends
        message = None if running else _("An assessment is already running.")
        return _form_error(form, 409, message, running=running, again=again)
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
    # The other language is the same figures in other words: re-written, never charged.
    report = _written(report, request.args.get("lang"))
    # The top bar shows the balance read with the job, so the two always agree.
    return render_template(
        "assessments/show.html",
        job=job,
        report=report,
        balance=job.balance,
        lapsing=_lapsing_after(job, current_user.id),
    )


@bp.get("/<job_id>/report.json")
@login_required
def report_json(job_id: str):
    """Download the figures behind a report, as stored, for the owner only."""
    job = _own_job(job_id, current_user.id)
    report = views.result(job.id, current_user.id) if job.status == "succeeded" else None
    if report is None:
        abort(404)
    report = {key: value for key, value in report.items() if key != "cache"}  # internals
    body = json.dumps(report, ensure_ascii=False, indent=2)
    response = current_app.response_class(body, mimetype="application/json")
    # A point's code carries its coordinates ("131016@35.68120,139.76710"): no comma in a name.
    code = re.sub(r"[^0-9A-Za-z.]", "_", report["area"]["code"])
    name = f"hazard-report-{code}-{report['lang']}.json"
    response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    response.headers["Cache-Control"] = "no-store"  # private figures: no copy kept anywhere
    return response


CONFIRM_CANCEL_FROM = 80  # percent: past it, a cancel throws away nearly finished work


@bp.post("/<job_id>/cancel")
@login_required
def cancel(job_id: str):
    """Cancel a pending or running job; past 80 % ask first (a page, no script needed)."""
    job = _own_job(job_id, current_user.id)
    if job.settled or job.status not in ("pending", "running"):
        if job.status == "succeeded":
            flash(_("It finished before the cancel arrived: here is your report."), "info")
        return redirect(url_for(".show", job_id=job.id), 303)
    if job.progress >= CONFIRM_CANCEL_FROM and request.form.get("confirm") != "yes":
        return render_template("assessments/cancel.html", job=job, balance=job.balance)
    if not transitions.cancel(job.id, current_user.id):
        # It ended on its own between the read and the cancel: say which way.
        if views.view(job.id, current_user.id).status == "succeeded":
            flash(_("It finished before the cancel arrived: here is your report."), "info")
    return redirect(url_for(".show", job_id=job.id), 303)


@bp.get("/<job_id>/status")
def status(job_id: str):
    """Render the status fragment that the job page polls."""
    identity = session_identity()
    if identity is None:
        return login_manager.unauthorized()
    user_id, generation = identity
    job = _own_job(job_id, user_id, generation)
    # The report arrives out of band once, with the fragment that stops the polling.
    report = None
    if job.status == "succeeded" and request.headers.get("HX-Request"):
        report = _written(views.result(job.id, user_id))
    # Rendered without Flask's context processors: Flask-Login's loads the user row to
    # offer current_user, which cost a quarter of the worker's time under polling.
    app = current_app._get_current_object()
    if job.status not in ("pending", "running"):  # settled, or being settled: no-store
        fragment = app.jinja_env.get_template(poll.FRAGMENT)
        lapsing = _lapsing_after(job, user_id)
        return fragment.render(job=job, report=report, oob=True, config=app.config, lapsing=lapsing)
    # A live job's fragment as the fast poll answers it: its ETag, and 304 when unchanged.
    etag = poll.fragment_etag(app, job, i18n.language(), request.script_root + request.path)
    headers = {"ETag": etag, "Cache-Control": poll.CACHE_CONTROL}
    if poll.matches(request.headers.get("If-None-Match"), etag):
        return "", 304, headers
    fragment = app.jinja_env.get_template(poll.FRAGMENT)
    return fragment.render(job=job, report=report, oob=True, config=app.config), headers


def _lapsing_after(job: views.JobView, user_id: int) -> int:
    """The user's points past their validity, once this job's point was refunded; else 0.

    A refunded point keeps the date it was issued: given back after its validity, it lapses
    at the purge chore's next run, and the page that says "refunded" says so too. Asked of
    a settled page only, never of a live poll.
    """
    if job.billing != "refunded":
        return 0
    return expiry.lapsing(user_id, current_app.config["POINTS_VALID_DAYS"])


def _written(report: dict | None, lang: str | None = None) -> dict | None:
    """Return a kept result as the job's page shows it, in lang if one of ours (no fetch).

    The work writes it (app/jobs/work.py): the report writes its words from its figures,
    so one stored before the headline rule changed reads as every other does now.
    """
    if report is None:
        return None
    return current_app.extensions["work"].written(report, lang)


def _own_job(raw_id: str, user_id: int, generation: int | None = None) -> views.JobView:
    job_id = views.parse_id(raw_id)
    job = views.view(job_id, user_id, generation) if job_id else None
    if job is None:
        # A revoked session (logged out, or its user deleted) goes to log in; asked only
        # here, so a live poll pays nothing for it. Another user's job and an unknown id
        # look the same.
        if generation is not None and not accounts.session_alive(user_id, generation):
            abort(_session_ended())
        abort(404)
    return job


def _session_ended():
    """Forget a revoked session and send the browser to log in."""
    session.pop("_user_id", None)  # so the login page does not take it for signed in
    return login_manager.unauthorized()


def _form_error(form: AssessmentForm, status: int, message: str | None = None, **extra):
    # The notice names the place it is about; a form kept to be sent again (a job still
    # running, the service busy) names the place it would assess, as while typing.
    if "existing" in extra or status in (409, 503):
        extra["preview"] = resolver.preview(form.query.data or "")
    body = render_template(
        "assessments/new.html",
        form=form,
        error=message,
        poll_seconds=current_app.config["POLL_INTERVAL_SECONDS"],
        **extra,
    )
    return current_app.make_response((body, status))
