"""gunicorn settings: one gthread worker; the master prepares the database first."""

import gc
import logging
import os
import signal
import sys

bind = f"127.0.0.1:{os.environ.get('PORT', '8000')}"
workers = 1  # jobs live in this one process; more workers would need a shared runner
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS", "8"))
graceful_timeout = 20
timeout = 60
# Longer than the job page's 2 s poll, so a browser's polls reuse one connection
# instead of racing the server closing it (measured in bench/: retries and p99 tails).
keepalive = 5
accesslog = os.environ.get("GUNICORN_ACCESSLOG", "-") or None  # "" turns it off
control_socket_disable = True  # several servers (tests, benchmarks) run side by side


def on_starting(server):
    """Start the embedded PostgreSQL when DATABASE_URL is unset, then migrate."""
    from flask_migrate import upgrade

    from app import create_app, embedded
    from app.extensions import db

    embedded.database_url()  # exported to the worker through the environment
    app = create_app()
    with app.app_context():
        upgrade()
        db.engine.dispose()  # the forked worker must not inherit the master's connections
    # Build the place index once here: every worker forked later shares it, so a
    # restarted worker answers at once instead of after a second of indexing.
    from app.assessment.gazetteer import gazetteer

    gazetteer()
    # Everything built so far lives as long as the process: keep it out of the cyclic
    # collector's full passes, which otherwise pause every request (bench/: p99 tails).
    gc.freeze()


def post_worker_init(worker):
    """Sweep dead jobs; on SIGTERM, settle this worker's jobs first, then drain and exit.

    gunicorn drains in-flight requests for up to graceful_timeout and the master
    SIGKILLs the worker at the same deadline, so settling only in worker_exit could
    come too late; settling at the signal tells users the truth at once.
    """
    gc.freeze()  # the app the worker just built lives as long as the worker
    from app import dbretry
    from app.jobs import housekeeping

    # gunicorn's own log too: a request that failed for an outage's reason shows its
    # traceback once a minute, not once per request.
    dbretry.filter_tracebacks(logging.getLogger("gunicorn.error"))

    # A worker starts after a crash or a deploy: settle what died before, now.
    housekeeping.sweep_in_background(worker.wsgi)
    runner = worker.wsgi.extensions["runner"]
    drain = signal.getsignal(signal.SIGTERM)

    def settle_then_drain(signum, frame):
        runner.shutdown()
        drain(signum, frame)

    signal.signal(signal.SIGTERM, settle_then_drain)


def worker_exit(server, worker):
    """Fail and settle the jobs of a stopping worker, then end it without waiting on them."""
    if worker.pid != os.getpid():  # the master also calls this for a worker already gone
        return
    app = getattr(worker, "wsgi", None)
    if app is None or "runner" not in getattr(app, "extensions", {}):
        return
    app.extensions["runner"].shutdown()
    # gunicorn has drained the in-flight requests and every job is settled in the
    # database. What is left are the abandoned jobs' threads (a layer fetch may sleep for
    # minutes), which the interpreter would join until gunicorn's graceful timeout ends in
    # SIGKILL. Nothing in them matters any more: leave now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
