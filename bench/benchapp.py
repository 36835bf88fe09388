"""The product plus comparison endpoints, for benchmarks only (never deployed).

    gunicorn -c gunicorn.conf.py bench.benchapp:app

The product gets no bench-only endpoint: these routes exist only in this module, which
calls app.create_app() and adds them, so they run in the same worker, with the same
session, extensions and database pool as the status fragment they are compared with.

- GET /bench/constant: a constant response (the framework's floor);
- GET /bench/select1: `SELECT 1` through the Flask-SQLAlchemy session;
- GET /bench/status-nocheck/<id>: the status fragment from the poll's SELECT with its
  staleness column replaced by `false` (what a poll would cost with no reaper at all);
- GET /bench/status-reap-every-poll/<id>: the reaping UPDATE on every poll, then the
  real status view (the naive reaper the design avoids);
- POST /bench/rq-submit: what the product would be with a queue instead: the same form,
  login, place lookup and balance check as POST /assessments, then an RQ enqueue (queue
  BENCH_RQ_QUEUE on BENCH_REDIS_URL) instead of the INSERT and the thread. It inserts no
  row, so it is a lower bound for a Flask + RQ design.
"""

import functools
import inspect
import os
import types

from flask import abort, current_app, redirect, session
from flask_login import current_user, login_required
from sqlalchemy import text

from app import assessments, create_app, housekeeping, jobs
from app.assessment import resolve_place
from app.extensions import db
from app.forms import AssessmentForm

app = create_app()

# The poll's own SELECT with its staleness column replaced by `false`; None if the
# product's SQL no longer has that shape.
NOCHECK_SQL = (
    text(jobs.VIEW_SQL.text.replace(jobs.STALE, "false"))
    if getattr(jobs, "STALE", None) and jobs.STALE in jobs.VIEW_SQL.text
    else None
)


def _clone(fn, namespace: dict):
    """fn itself (same code), resolving its globals in namespace instead of its module."""
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


# Clones of the product's own jobs._select, jobs.view, assessments._own_job and
# assessments.status in which (only) VIEW_SQL is the staleness-free SELECT: the same
# code path as the real poll, whatever it currently is, minus the check.
_jobs_ns = {**vars(jobs), "VIEW_SQL": NOCHECK_SQL}
_jobs_ns["_select"] = _clone(jobs._select, _jobs_ns)
_jobs_ns["view"] = _clone(jobs.view, _jobs_ns)
_views_ns = {**vars(assessments), "jobs": types.SimpleNamespace(**_jobs_ns)}
_views_ns["_own_job"] = _clone(assessments._own_job, _views_ns)
_status_inner = inspect.unwrap(assessments.status)
_status_nocheck = _clone(_status_inner, _views_ns)
if _status_inner is not assessments.status:  # the product view is wrapped (login_required)
    _status_nocheck = login_required(_status_nocheck)


@app.get("/bench/constant")
def constant():
    return "ok\n"


@app.get("/bench/select1")
def select1():
    value = db.session.execute(text("SELECT 1")).scalar_one()
    db.session.rollback()
    return f"{value}\n"


@app.get("/bench/status-nocheck/<job_id>")
def status_nocheck(job_id: str):
    """GET /assessments/<id>/status with the staleness column of its SELECT removed."""
    if NOCHECK_SQL is None:
        abort(501)
    return _status_nocheck(job_id=job_id)


@app.get("/bench/status-reap-every-poll/<job_id>")
def status_reap_every_poll(job_id: str):
    """Run the reaping UPDATE (with its own condition, committed) and then the real view.

    Signed-in check only (the real view then checks ownership): a bench route must not
    add a user load that the product's poll no longer does.
    """
    if "_user_id" not in session:
        abort(401)
    parsed = jobs.parse_id(job_id)
    if parsed is not None:
        jobs.reap(parsed)
    return current_app.view_functions["assessments.status"](job_id=job_id)


@functools.cache
def _rq_queue():
    from redis import Redis
    from rq import Queue

    redis = Redis.from_url(os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    return Queue(os.environ["BENCH_RQ_QUEUE"], connection=redis)


@app.post("/bench/rq-submit")
@login_required
def rq_submit():
    """POST /assessments' checks, then an RQ enqueue instead of the INSERT and the thread."""
    from bench import rqjob

    housekeeping.trigger(current_app._get_current_object())
    form = AssessmentForm()
    if not form.validate_on_submit():
        abort(400)
    resolve_place(form.query.data)
    balance = db.session.execute(
        text("SELECT point_balance FROM users WHERE id = :u"), {"u": current_user.id}
    ).scalar_one()
    db.session.rollback()
    if balance < 1:
        abort(402)
    job = _rq_queue().enqueue(rqjob.started)
    return redirect(f"/bench/rq-job/{job.id}", 303)
