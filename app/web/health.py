"""GET /healthz: is the worker up, can it reach the database, how many jobs it runs."""

import os

from flask import Blueprint, current_app, jsonify
from sqlalchemy import text

from ..extensions import csrf, db

bp = Blueprint("health", __name__)


@bp.get("/healthz")
@csrf.exempt
def healthz():
    """Report the worker's health as JSON."""
    try:
        db.session.execute(text("SELECT 1"))
        db.session.rollback()
        db_ok = True
    except Exception:  # noqa: BLE001 - health reports the failure instead of raising
        current_app.logger.exception("health check: database unreachable")
        db.session.rollback()
        db_ok = False
    body = {
        "status": "ok" if db_ok else "degraded",
        "db": "ok" if db_ok else "error",
        "pid": os.getpid(),
        "jobs_running": len(current_app.extensions["runner"].running_ids()),
    }
    return jsonify(body), 200 if db_ok else 503
