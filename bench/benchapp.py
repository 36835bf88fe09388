"""The product plus comparison endpoints, for benchmarks only (never deployed).

    gunicorn -c gunicorn.conf.py bench.benchapp:app

The product gets no bench-only endpoint: these routes exist only in this module, which
calls app.create_app() and adds them, so they run in the same worker, with the same
session, extensions and database pool as the status fragment they are compared with.

- GET /bench/constant: a constant response (the framework's floor);
- GET /bench/select1: `SELECT 1` through the Flask-SQLAlchemy session;
- GET /bench/status-nocheck/<id>: the poll's fast path with the staleness column of its
  SELECT replaced by `false` (what a poll would cost with no reaper at all);
- GET /bench/status-reap-every-poll/<id>: the reaping UPDATE on every poll, then the
  poll's fast path (the naive reaper the design avoids);
- GET /bench/status-nometrics/<id>: the poll's fast path with its latency histogram off;
- POST /bench/floor-submit: the design's floor for a submit, answered before Flask: the
  product's INSERT, a thread, and that thread's `pending -> running` transaction, with no
  framework, session, CSRF, form, place lookup or ledger (the form's `user` is trusted);
- BENCH_IDLE_PLACE: jobs for that place sleep until stopped (poll_open's sleeping jobs).
- POST /bench/rq-submit: what the product would be with a queue instead: the same form,
  login, place lookup and balance check as POST /assessments, then an RQ enqueue (queue
  BENCH_RQ_QUEUE on BENCH_REDIS_URL) instead of the INSERT and the thread. It inserts no
  row, so it is a lower bound for a Flask + RQ design.
"""

import functools
import os
import re
import threading
import types
import urllib.parse

from flask import abort, current_app, redirect
from sqlalchemy import text

from app import create_app
from app.assessment import resolve_place
from app.extensions import db
from app.jobs import housekeeping, transitions, views
from app.web import poll
from app.web.auth import session_user_id
from app.web.forms import AssessmentForm

app = create_app()

# The poll's own SELECT with its staleness column replaced by `false`; None if the
# product's SQL no longer has that shape.
NOCHECK_SQL = (
    text(views.VIEW_SQL.text.replace(transitions.STALE, "false"))
    if getattr(transitions, "STALE", None) and transitions.STALE in views.VIEW_SQL.text
    else None
)


def _clone(fn, namespace: dict):
    """fn itself (same code), resolving its globals in namespace instead of its module."""
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


# The product's poll fast path (app/web/poll.py) on three more paths, its fragment (or its
# whole call) run in a namespace that changes one thing: the same path as the real poll,
# whatever it currently is, but for that one difference.
def _poll_variant(name: str, path: str, change: dict, method: str = "fragment") -> type:
    namespace = {**vars(poll), **change}
    copy = _clone(getattr(poll.LivePoll, method), namespace)
    return type(name, (poll.LivePoll,), {"path": re.compile(path), method: copy})


# GET /bench/status-nocheck/<id>: the poll's SELECT with its staleness column replaced
# by `false` (what a poll would cost with no reaper at all).
_nocheck_ns = {**vars(views), "VIEW_SQL": NOCHECK_SQL}
_nocheck_ns["_select"] = _clone(views._select, _nocheck_ns)
_nocheck_ns["live_view"] = _clone(views.live_view, _nocheck_ns)
_nocheck = {"views": types.SimpleNamespace(**_nocheck_ns)}
NoCheckPoll = _poll_variant("NoCheckPoll", r"/bench/status-nocheck/([^/]+)", _nocheck)


# GET /bench/status-reap-every-poll/<id>: the reaping UPDATE (with its own condition,
# committed) on every poll, then the real poll: the naive reaper the design avoids.
def _reap_then_live_view(job_id, user_id, generation=None):
    transitions.reap(job_id)
    return views.live_view(job_id, user_id, generation)


_reap = {"views": types.SimpleNamespace(**{**vars(views), "live_view": _reap_then_live_view})}
ReapPoll = _poll_variant("ReapPoll", r"/bench/status-reap-every-poll/([^/]+)", _reap)


class FloorSubmit:
    """POST /bench/floor-submit: the INSERT, a thread, its start; nothing else (see above)."""

    def __init__(self, app, wsgi_app):
        self.app = app
        self.wsgi_app = wsgi_app

    def __call__(self, environ, start_response):
        if environ["REQUEST_METHOD"] != "POST" or environ["PATH_INFO"] != "/bench/floor-submit":
            return self.wsgi_app(environ, start_response)
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        user_id = int(urllib.parse.parse_qs(body.decode())["user"][0])
        with self.app.app_context():
            params = {"u": user_id, "g": 0, "q": "floor", "l": "en", "a": None}
            job_id = transitions.execute_one(transitions.CREATE_SQL, params).id
        threading.Thread(target=self.run, args=(job_id,), daemon=True).start()
        start_response("303 See Other", [("Location", f"/x/{job_id}"), ("Content-Length", "0")])
        return [b""]

    def run(self, job_id) -> None:
        """Start the job as transitions.start does (its own transaction), then finish it."""
        with self.app.app_context():
            conn = db.engine.raw_connection()
            try:
                cur = conn.cursor()
                cur.execute(
                    "UPDATE assessment_jobs SET status = 'running', started_at = now(),"
                    " heartbeat_at = now() WHERE id = %s AND status = 'pending'",
                    (job_id,),
                )
                conn.commit()
                cur.execute(
                    "UPDATE assessment_jobs SET status = 'succeeded', finished_at = now()"
                    " WHERE id = %s",
                    (job_id,),
                )
                conn.commit()
            finally:
                conn.close()


# GET /bench/status-nometrics/<id>: the product's poll with its latency histogram
# switched off (one observe per poll): what the metrics cost the hot path.
_NO_OBSERVE = types.SimpleNamespace(observe=lambda seconds: None)
_histograms = dict.fromkeys(("POLL_FAST", "POLL_FULL", "POLL_UNCHANGED"), _NO_OBSERVE)
_nometrics = {"metrics": types.SimpleNamespace(**_histograms)}
NoMetricsPoll = _poll_variant(
    "NoMetricsPoll", r"/bench/status-nometrics/([^/]+)", _nometrics, "__call__"
)


if NOCHECK_SQL is not None:
    app.wsgi_app = NoCheckPoll(app, app.wsgi_app)
app.wsgi_app = NoMetricsPoll(app, app.wsgi_app)
app.wsgi_app = ReapPoll(app, app.wsgi_app)
app.wsgi_app = FloorSubmit(app, app.wsgi_app)


@app.get("/bench/constant")
def constant():
    return "ok\n"


@app.get("/bench/select1")
def select1():
    value = db.session.execute(text("SELECT 1")).scalar_one()
    db.session.rollback()
    return f"{value}\n"


@functools.cache
def _rq_queue():
    from redis import Redis
    from rq import Queue

    redis = Redis.from_url(os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    return Queue(os.environ["BENCH_RQ_QUEUE"], connection=redis)


@app.post("/bench/rq-submit")
def rq_submit():
    """POST /assessments' checks, then an RQ enqueue instead of the INSERT and the thread."""
    from bench import rqjob

    user_id = session_user_id()  # as POST /assessments: the signed-in id, no user load
    if user_id is None:
        abort(401)
    housekeeping.trigger(current_app._get_current_object())
    form = AssessmentForm()
    if not form.validate_on_submit():
        abort(400)
    resolve_place(form.query.data)
    balance = db.session.execute(
        text("SELECT point_balance FROM users WHERE id = :u"), {"u": user_id}
    ).scalar_one()
    db.session.rollback()
    if balance < 1:
        abort(402)
    job = _rq_queue().enqueue(rqjob.started)
    return redirect(f"/bench/rq-job/{job.id}", 303)


def _idle_place(place: str) -> None:
    """BENCH_IDLE_PLACE: jobs for that place wait until stopped, polled and computing nothing."""
    from app.assessment.sources.providers import DATASETS
    from app.assessment.work import keys_for

    from .idle import pause

    provider, area = app.extensions["layer_provider"], resolve_place(place)
    idle = {k for ds in DATASETS for k in keys_for(area, ds, provider)}
    pause(provider, idle)  # the work in the job's thread
    if (host := app.extensions.get("work_host")) is not None:  # the work in its process
        host.setup, host.args = "bench.idle:setup", {**host.args, "BENCH_IDLE_KEYS": sorted(idle)}


if os.environ.get("BENCH_IDLE_PLACE"):
    _idle_place(os.environ["BENCH_IDLE_PLACE"])
