"""gunicorn settings: one gthread worker; the master prepares the database first."""

import gc
import logging
import math
import os
import signal
import sys
import threading
from pathlib import Path

bind = f"127.0.0.1:{os.environ.get('PORT', '8000')}"
# One worker by default. More (WEB_CONCURRENCY) are safe in either executor: with threads
# each process keeps its own slots and settles its own jobs; with the queue, workers run them.
workers = int(os.environ.get("WEB_CONCURRENCY", "1"))
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS", "8"))
# A SIGTERM first lets running jobs finish for DRAIN_SECONDS, then settles the rest: the
# master's patience (it SIGKILLs the worker at this deadline) covers both.
DRAIN_SECONDS = float(os.environ.get("DRAIN_SECONDS") or 0)
graceful_timeout = 20 + math.ceil(DRAIN_SECONDS)
# How long a stopping worker waits for a drain under way to settle the job it is settling.
DRAIN_EXIT_SECONDS = 5.0
timeout = 60
# Longer than the job page's 2 s poll, so a browser's polls reuse one connection
# instead of racing the server closing it (measured in bench/: retries and p99 tails).
keepalive = 5
accesslog = os.environ.get("GUNICORN_ACCESSLOG", "-") or None  # "" turns it off
control_socket_disable = True  # several servers (tests, benchmarks) run side by side
# Whose X-Forwarded-Proto and SCRIPT_NAME headers to believe: nobody's unless set. gunicorn's
# own default trusts loopback, so any local process (or a proxy relaying anyone's headers)
# could set them, and a SCRIPT_NAME the path does not start with was a 500. Behind a proxy,
# name its address in FORWARDED_ALLOW_IPS (docs/deployment.md, "Behind a proxy").
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "")

if os.environ.get("LOG_FORMAT") == "json":
    # gunicorn's own lines as JSON too, from its first one: everything goes through the
    # root logger's one handler, in the format app/operations/logs.py gives the app's lines.
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "root": {"level": "INFO", "handlers": ["json"]},
        "loggers": {
            "gunicorn.error": {"level": "INFO", "handlers": [], "propagate": True},
            "gunicorn.access": {"level": "INFO", "handlers": [], "propagate": True},
        },
        "handlers": {
            "json": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            }
        },
        "formatters": {"json": {"()": "app.operations.logs.json_formatter"}},
    }


def on_starting(server):
    """Start the embedded PostgreSQL when DATABASE_URL is unset, then migrate (once)."""
    if metrics_dir := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Counts of an earlier run would be added to this one's: start from zero.
        for stale in Path(metrics_dir).glob("*.db"):
            stale.unlink()
    from app import create_app
    from app.database import embedded, schema
    from app.extensions import db

    embedded.database_url()  # exported to the worker through the environment
    app = create_app()
    with app.app_context():
        schema.upgrade_once()  # several instances may start at the same moment
        db.engine.dispose()  # the forked worker must not inherit the master's connections
    # Build the place index once here: every worker forked later shares it, so a
    # restarted worker answers at once instead of after a second of indexing.
    from app.assessment.place.gazetteer import gazetteer

    gazetteer()
    # Everything built so far lives as long as the process: keep it out of the cyclic
    # collector's full passes, which otherwise pause every request (bench/: p99 tails).
    gc.freeze()


def post_worker_init(worker):
    """Sweep dead jobs; on SIGTERM, finish or settle this worker's jobs, then drain and exit;
    on a quick stop (SIGQUIT, SIGINT), settle them and exit at once.

    gunicorn drains in-flight requests for up to graceful_timeout and the master
    SIGKILLs the worker at the same deadline, so settling only in worker_exit could
    come too late; settling at the signal tells users the truth at once.
    """
    gc.freeze()  # the app the worker just built lives as long as the worker
    _guard_own_errors(worker.wsgi.extensions["security_headers"])
    from app.database import dbretry
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

    def finish_then_drain(signum, frame):
        # The worker keeps serving while its jobs finish: pages and polls answer, a
        # submit gets 503 + Retry-After. Only then does gunicorn stop accepting.
        runner.stop_admitting()

        def finish():
            try:
                runner.drain(DRAIN_SECONDS)
            finally:
                drain(signum, frame)

        threading.Thread(target=finish, name="drain", daemon=True).start()

    signal.signal(signal.SIGTERM, finish_then_drain if DRAIN_SECONDS > 0 else settle_then_drain)

    quit_now = quick_stop(worker)
    signal.signal(signal.SIGQUIT, quit_now)
    signal.signal(signal.SIGINT, quit_now)


STOP_SIGNALS = (signal.SIGQUIT, signal.SIGINT, signal.SIGTERM)


def ignore_stop_signals() -> None:
    """From here on the worker is leaving: a further stop signal must not cut that short."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def quick_stop(worker):
    """Return the worker's handler of a quick stop (Ctrl-C: the terminal's SIGINT, and the
    master's SIGQUIT after it), in place of gthread's.

    gthread's shuts its request pool down from the signal, taking the pool's lock; a signal
    that lands while the worker's own loop holds that lock (handing a request to the pool as
    it starts a thread) waited on itself until the master's SIGKILL, the jobs left running.
    The pool needs no shutdown: worker_exit settles the jobs and ends the process (os._exit)
    whatever the pool's threads are doing. Once only: a second stop signal must not cut
    worker_exit short.
    """

    def quit_now(signum, frame):
        ignore_stop_signals()
        worker.alive = False
        worker.cfg.worker_int(worker)
        sys.exit(0)

    return quit_now


def _guard_own_errors(headers: list[tuple[str, str]]) -> None:
    """Give the answers gunicorn writes itself (414, 431, 400...) the app's security headers.

    gunicorn writes them before any WSGI app sees the request, through util.write_error,
    its one writer of such answers (workers/base.py, handle_error), which takes no headers;
    this replaces it in the worker with one that sends the headers Flask's pages carry
    (app/web/headers.py computes them). tests/test_headers.py checks a 414 and a 431.
    """
    import html

    from gunicorn import util

    extra = "".join(f"{name}: {value}\r\n" for name, value in headers)

    def write_error(sock, status_int, reason, mesg):
        body = (
            f"<!doctype html><title>{html.escape(reason)}</title>"
            f"<h1>{html.escape(reason)}</h1><p>{html.escape(mesg)}</p>\n"
        ).encode("latin1", "replace")
        head = (
            f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
            f"Content-Type: text/html\r\nContent-Length: {len(body)}\r\n"
            f"Cache-Control: no-store\r\n{extra}\r\n"
        ).encode("latin1")
        util.write_nonblock(sock, head + body)

    util.write_error = write_error


def worker_exit(server, worker):
    """Fail and settle the jobs of a stopping worker, then end it without waiting on them."""
    if worker.pid != os.getpid():  # the master also calls this for a worker already gone
        return
    app = getattr(worker, "wsgi", None)
    if app is None or "runner" not in getattr(app, "extensions", {}):
        return
    ignore_stop_signals()  # a Ctrl-C after a SIGTERM must not cut the settling short
    app.extensions["runner"].shutdown()  # and the pixel pool's processes with the jobs
    # A drain under way (SIGTERM with DRAIN_SECONDS) may be settling a job: its stop is
    # set now, so it ends soon; give it a moment before leaving.
    for thread in threading.enumerate():
        if thread.name == "drain" and thread is not threading.current_thread():
            thread.join(DRAIN_EXIT_SECONDS)
    # gunicorn has drained the in-flight requests and every job is settled in the
    # database. What is left are the abandoned jobs' threads (a layer fetch may sleep for
    # minutes), which the interpreter would join until gunicorn's graceful timeout ends in
    # SIGKILL. Nothing in them matters any more: leave now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def child_exit(server, worker):
    """Keep a dead worker's counters but drop its live gauges (slots in use)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
