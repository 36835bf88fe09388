"""Area assessments: paid multi-minute jobs, run in-process, honest about points.

create_app() is the composition root: the one place that wires app.web, app.jobs,
app.points, app.assessment and the root modules together.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Create and configure the app.

    Flask and the extensions are imported here, not with the package: a process that
    needs only a pure module under app (the pixel pool's, grid/pixels.py) stays small.
    """
    from flask import Flask

    from . import config
    from .database import dbretry, embedded, limits
    from .extensions import babel, csrf, db, limiter, login_manager, migrate
    from .operations import arenas, failpoints, logs

    arenas.cap()  # before the first job's threads ask for arenas of their own

    app = Flask(__name__, template_folder="../templates", static_folder="../static")
    app.config.from_mapping(
        MAX_CONTENT_LENGTH=64 * 1024,
        # No pre-ping: it is a round trip on every checkout, as much as the poll's query.
        # Connections are recycled instead; one that broke fails its request and is dropped.
        # Keepalives: a connection to a vanished server fails in seconds (database/limits.py).
        SQLALCHEMY_ENGINE_OPTIONS={
            "pool_size": 10,
            "max_overflow": 30,
            "pool_recycle": 1800,
            "connect_args": limits.connect_args(),
        },
        WTF_CSRF_TIME_LIMIT=None,
        **config.from_env(),
    )
    if test_config is not None:
        app.config.from_mapping(test_config)
    if app.config.get("SWEEP_INTERVAL_SECONDS") is None:
        app.config["SWEEP_INTERVAL_SECONDS"] = app.config["JOB_LEASE_SECONDS"]
    from .jobs.views import LATE_HEARTBEATS

    # Settings with which jobs cannot work stop the server here, naming the setting.
    config.check(app.config, LATE_HEARTBEATS)
    if "SECRET_KEY" not in app.config or not app.config["SECRET_KEY"]:
        app.config["SECRET_KEY"] = config.secret_key()
    if fallbacks := app.config["SECRET_KEY_FALLBACKS"]:
        # Flask checks sessions (and so the fast poll) against the fallbacks itself;
        # Flask-WTF signs with one key, and itsdangerous takes a list, newest last.
        app.config.setdefault("WTF_CSRF_SECRET_KEY", [*fallbacks, app.config["SECRET_KEY"]])
    if "SQLALCHEMY_DATABASE_URI" not in app.config:
        app.config["SQLALCHEMY_DATABASE_URI"] = config.sqlalchemy_url(embedded.database_url())
    logs.configure(app.config["LOG_FORMAT"])
    # An outage fails every request the same way: one traceback a minute says it all.
    dbretry.filter_tracebacks(logging.getLogger())
    failpoints.configure(app.config["FAILPOINTS"])

    db.init_app(app)
    migrate.init_app(app, db, directory=str(config.ROOT / "migrations"))
    csrf.init_app(app)
    login_manager.init_app(app)
    from .web import i18n

    babel.init_app(
        app,
        default_translation_directories=str(config.ROOT / "translations"),
        locale_selector=i18n.select_locale,
        timezone_selector=i18n.select_timezone,
    )
    i18n.init_jinja(app)
    if not app.config["RATELIMIT_STORAGE_URI"]:
        # The brakes count where every process sees them: the database the app has.
        from .database import brakes

        app.config["RATELIMIT_STORAGE_URI"] = brakes.uri_for(app.config["SQLALCHEMY_DATABASE_URI"])
    limiter.init_app(app)
    from .points import accounts

    # Made now, once per process (gunicorn's master: before the fork), so the first log-in
    # with an unknown email does not take the time of making it on top of checking it.
    accounts.dummy_hash()
    # The decorated views (log-in and sign-up POSTs) check their limits themselves; the
    # hook Flask-Limiter puts before every request would find none (no default limits)
    # and still cost each Flask request. Its after-request hook stays: it counts failures.
    app.before_request_funcs[None].remove(limiter._check_request_limit)

    from .assessment.sources.probe import choose_provider
    from .jobs import housekeeping
    from .jobs.runner import Runner

    app.extensions["runner"] = Runner(
        app, app.config["MAX_CONCURRENT_JOBS"], app.config["JOB_HEARTBEAT_SECONDS"]
    )
    app.extensions["executor"] = _executor(app)
    app.extensions["housekeeping"] = housekeeping.throttles()
    provider, choice = choose_provider(app.config)
    app.extensions["layer_provider"], app.extensions["provider_choice"] = provider, choice
    if not choice["explicit"]:
        logging.getLogger(__name__).warning(
            "LAYER_PROVIDER unset: serving %s data (%s)", choice["mode"], choice["reason"]
        )
        # Asked again every few minutes, per process: started by the first request a
        # process serves (gunicorn forks after this), not here.
        app.extensions["provider_recheck"] = {
            "pid": 0,
            "stop": threading.Event(),
            # A queue worker serves no request: it starts its recheck itself (worker.run).
            "start": lambda: _start_recheck(app),
        }
        app.before_request(app.extensions["provider_recheck"]["start"])

    from .assessment import hosted

    def share(local: object, ttl_key: str) -> object:
        from .assessment.report.analysis import LAYERS
        from .caches.sharedflight import SharedSingleFlightCache

        return SharedSingleFlightCache(
            app,
            local,
            app.config[ttl_key],
            # Every layer of every job slot may be fetching at once.
            connections=app.config["MAX_CONCURRENT_JOBS"] * len(LAYERS),
        )

    app.extensions["layer_cache"] = hosted.layer_cache(
        app.config, share if _shared_layer_cache(app) else None
    )

    # What a job computes: a module keeping app/jobs/work.py's contract.
    from .jobs.work import check

    work = app.extensions["work"] = check(importlib.import_module(app.config["JOB_WORK"]))
    if work.HOSTED and _work_process(app):
        from .jobs.offload import Host

        app.extensions["work_host"] = Host(work.HOSTED, work.settings(app.config), work.Stopped)

    from .web import (
        assessments,
        auth,
        cli,
        compare,
        errors,
        headers,
        health,
        main,
        preferences,
        support,
    )

    headers.init_app(app)

    for module in (auth, main, assessments, compare, support, health, preferences):
        app.register_blueprint(module.bp)
    errors.init_app(app)
    # Every request may set off the due chores (the fast poll, which bypasses Flask,
    # does the same): while anyone uses any instance, dead jobs get swept.
    app.before_request(lambda: housekeeping.trigger(app))
    cli.init_app(app)
    from .web import ops, payments

    ops.init_app(app)
    payments.init_app(app)
    from .web import proxies
    from .web.poll import LivePoll

    proxies.install(app)  # inside the fast poll, which needs no client address
    app.wsgi_app = LivePoll(app, app.wsgi_app)
    return app


def _executor(app: Flask):
    """Return the executor JOB_EXECUTOR names: this process's threads, or the queue."""
    from .jobs import pipeline
    from .jobs.executor import ThreadExecutor

    name = app.config["JOB_EXECUTOR"]
    if name == "thread":
        return ThreadExecutor(app.extensions["runner"], pipeline.run)
    if name == "procrastinate":
        from .jobs.procrastinate_executor import ProcrastinateExecutor

        return ProcrastinateExecutor(app.config["MAX_QUEUED_JOBS"])
    raise ValueError(f"JOB_EXECUTOR must be thread or procrastinate, not {name!r}")


def _shared_layer_cache(app: Flask) -> bool:
    """Share upstream answers across processes: on, off, or auto (with the queue)."""
    setting = app.config["SHARED_LAYER_CACHE"]
    if setting not in ("auto", "on", "off"):
        raise ValueError(f"SHARED_LAYER_CACHE must be auto, on or off, not {setting!r}")
    return setting == "on" or (setting == "auto" and app.config["JOB_EXECUTOR"] == "procrastinate")


def _work_process(app: Flask) -> bool:
    """Run reports' work in a process beside the worker: on, off, or auto.

    Auto: with more than one core, when this process's threads run the jobs and the
    layer cache is this process's own (a queue worker serves no page; the shared cache
    needs the database, which the work's process never touches).
    """
    setting = app.config["WORK_PROCESS"]
    if setting not in ("auto", "on", "off"):
        raise ValueError(f"WORK_PROCESS must be auto, on or off, not {setting!r}")
    if setting == "auto":
        return (
            (os.cpu_count() or 1) > 1
            and app.config["JOB_EXECUTOR"] == "thread"
            and not _shared_layer_cache(app)
        )
    return setting == "on"


_recheck_lock = threading.Lock()


def _start_recheck(app: Flask) -> None:
    """Start this process's provider recheck once (LAYER_PROVIDER unset)."""
    state = app.extensions["provider_recheck"]
    if state["pid"] == os.getpid():
        return
    with _recheck_lock:
        if state["pid"] == os.getpid():
            return
        state["pid"] = os.getpid()
    from .assessment.sources.probe import recheck

    def switch(provider: Any, choice: dict[str, Any]) -> None:
        app.extensions["layer_provider"], app.extensions["provider_choice"] = provider, choice

    threading.Thread(
        target=recheck,
        args=(dict(app.config), switch, state["stop"]),
        name="provider-recheck",
        daemon=True,
    ).start()
