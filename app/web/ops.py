"""Operations: the support role's /support/ops page, /metrics, submit outcomes, the drain flag."""

import hmac
import ipaddress
import os

from flask import Blueprint, Flask, Response, abort, current_app, render_template, request
from flask_babel import lazy_gettext as _l
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from ..extensions import csrf
from ..jobs import stats
from ..operations import alerts, metrics
from . import charts
from .auth import session_user_id
from .support import support_required

bp = Blueprint("ops", __name__)

SUBMIT_ENDPOINT = "assessments.create"


SERIES = ("succeeded", "interrupted", "failed", "cancelled")
# The outcomes' names as the legend and the bars' titles say them (keys stay CSS classes).
OUTCOMES = {
    "succeeded": _l("succeeded"),
    "interrupted": _l("interrupted"),
    "failed": _l("failed"),
    "cancelled": _l("cancelled by their user"),
}
REFRESH_SECONDS = 10


@bp.get("/support/ops")
@support_required
def ops_page():
    """Show what jobs and points did in the last day and week, from the database alone."""
    return render_template("support/ops.html", **_numbers())


@bp.get("/support/ops/live")
@support_required
def ops_fragment():
    """Render the page's numbers again: the open page asks for them every 10 s."""
    return render_template("partials/_ops.html", **_numbers())


def _numbers() -> dict:
    alerts.kick()  # while someone watches, an alert whose post failed is tried again
    numbers = stats.overview()
    for key in ("day", "week"):
        numbers[key]["chart"] = charts.stacked_hours(numbers[key]["hourly"], OUTCOMES)
    return {**numbers, "outcomes": OUTCOMES, "refresh": REFRESH_SECONDS}


@bp.get("/metrics")
@csrf.exempt
def metrics_page():
    """Expose the counters in Prometheus' text format, to loopback or a bearer token only."""
    if not _may_scrape():
        abort(404)  # as if there were nothing here
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        # Every worker writes its values to files there; add them up for this scrape.
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)


def _may_scrape() -> bool:
    token = current_app.config["METRICS_TOKEN"]
    given = request.headers.get("Authorization")
    if given is not None:
        # A token given is checked wherever it comes from, loopback too: a wrong one is
        # refused, not waved through because the request happens to come from this host.
        return bool(token) and hmac.compare_digest(given.encode(), f"Bearer {token}".encode())
    # A request relayed by a proxy on this host comes from loopback too: not trusted.
    if request.headers.get("X-Forwarded-For") or request.headers.get("Forwarded"):
        return False
    try:
        return ipaddress.ip_address(request.remote_addr or "").is_loopback
    except ValueError:
        return False


def count_submit(response: Response) -> Response:
    """Count a submit by the status it was answered with (303, 400, 402, 409, 503...)."""
    if request.endpoint == SUBMIT_ENDPOINT:
        job_id = None
        if response.status_code == 303:
            job_id = response.headers.get("Location", "").rstrip("/").rpartition("/")[2]
        metrics.submitted(response.status_code, session_user_id(), job_id)
    return response


def init_app(app: Flask) -> None:
    """Register /metrics and the submit counter."""
    app.register_blueprint(bp)
    app.after_request(count_submit)
