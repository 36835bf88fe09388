"""gunicorn settings: one gthread worker; the master prepares the database first."""

import os

bind = f"127.0.0.1:{os.environ.get('PORT', '8000')}"
workers = 1  # jobs live in this one process; more workers would need a shared runner
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS", "8"))
graceful_timeout = 20
timeout = 60
accesslog = os.environ.get("GUNICORN_ACCESSLOG", "-") or None  # "" turns it off
control_socket_disable = True  # several servers (tests, benchmarks) run side by side


def on_starting(server):
    """Start the embedded PostgreSQL when DATABASE_URL is unset, then migrate."""
    from flask_migrate import upgrade

    from app import create_app, embedded

    embedded.database_url()  # exported to the worker through the environment
    app = create_app()
    with app.app_context():
        upgrade()


def worker_exit(server, worker):
    """Fail and settle the jobs of a stopping worker before it exits."""
    app = getattr(worker, "wsgi", None)
    if app is not None and "runner" in getattr(app, "extensions", {}):
        app.extensions["runner"].shutdown()
