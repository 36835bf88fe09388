"""The area assessment as a job's work: the report's side of app/jobs/work.py's contract.

prepare reads what was typed into an area (and asks before anything is paid for twice or
for more than was read), run builds the report, steps says which layers a job has read.
"""

import threading
import uuid
from collections.abc import Mapping
from typing import Any

from flask import current_app
from sqlalchemy import text

from ..extensions import db
from ..operations import metrics
from . import hosted
from .errors import ProviderError, Stopped, UnreadableTiles
from .place.area import Area
from .place.resolver import UNREAD, UNREAD_NEAR, PlaceAmbiguous, near, resolve_place, unread
from .report.analysis import LANGS, LAYERS, Layer, translate
from .sources.gsi_address import place_address
from .work import ANALYSING_STEP, LAYERS_STEP, run_assessment

Refundable = ProviderError
HOSTED = "app.assessment.hosted:setup"
READY = "Your report is ready."  # the finished job's message (app/web/i18n.py translates it)
PARTS_STEP = LAYERS_STEP  # "layers:flood,tsunami": the page ticks each layer read
# A point's report reads a few tiles around it, a municipality's its whole outline: each
# kind has its own typical time (app/jobs/estimate.py), a point's circle its radius.
KIND = "CASE WHEN coalesce((area->>'radius_m')::float, 0) > 0 THEN 'point' ELSE 'place' END"
__all__ = ["HOSTED", "PARTS_STEP", "AlreadyReported", "Refundable", "Stopped"]


class AlreadyReported(Exception):
    """The user has a kept report of this area; starting again needs their confirmation."""

    def __init__(self, job_id: uuid.UUID, lang: str):
        super().__init__("a report of this area is already yours")
        self.job_id = job_id
        self.lang = lang  # the report's language: the other one is free to read


def prepare(user_id: int, query: str, lang: str, confirmed: bool | str) -> dict[str, Any]:
    """Return the area a submit asks about; raise what the reader must answer first.

    Resolving the place charges nothing. Unless confirmed, a place the user already has a
    kept report of raises AlreadyReported (in this language if there is one), so nobody
    pays twice for the same thing without knowing it. A confirmation may name the area's
    code: it then confirms that area only, not another typed in its place.
    """
    area = resolve_place(query)
    # The confirmation names the area the form previewed: before GSI moves it to its 番地.
    confirmed = confirmed is True or confirmed == area.code
    if not confirmed and (rest := unread(query)):
        # A street typed in romaji is not read: ask before the whole municipality is paid
        # for, offering it as the one choice (free), the form saying what was not read.
        # The 町丁目 whose reading is nearest what was not read are offered too (near).
        close = near(query)
        said = [(UNREAD_NEAR if close else UNREAD, {"unread": rest})]
        raise PlaceAmbiguous(query, [*close, area], parts=said)
    if area.address and not current_app.extensions["layer_provider"].is_demo:
        url = current_app.config["GSI_ADDRESS_SEARCH_URL"]
        area = place_address(area, url, current_app.extensions["layer_cache"])
    if not confirmed and (reports := finished_reports(user_id, area)):
        same = next((r for r in reports if r.lang == lang), reports[0])
        raise AlreadyReported(same.id, same.lang)
    return area.to_dict()


def run(
    job_input: dict[str, Any], lang: str, progress: Any, stop: threading.Event
) -> dict[str, Any]:
    """Build the report in the job's thread, with the app's providers and layer cache."""
    return run_assessment(
        Area.from_dict(job_input),
        lang,
        provider=current_app.extensions["layer_provider"],
        cache=current_app.extensions["layer_cache"],
        progress=progress,
        stop=stop,  # a reaped or shut-down job gives up even inside a fetch
    )


def settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """Return the settings the work's process gets (hosted.PREFIXES; no secret)."""
    return hosted.settings(config)


def payload(job_input: dict[str, Any], lang: str) -> dict[str, Any]:
    """Return what the work's process needs: the area, the language, the data served."""
    # The report reads what the worker's pages say it reads (demo or real, as probed).
    choice = current_app.extensions["provider_choice"]
    serving = choice["setting"] if choice["explicit"] else choice["mode"]
    return hosted.payload(job_input, lang, serving)


def failure(exc: Exception) -> str:
    """Return the message of a job whose hazard data could not be read (refunded)."""
    assert isinstance(exc, ProviderError)
    return f'The "{exc.dataset}" hazard data could not be fetched: {exc.reason}.'


def alert(exc: Exception) -> tuple[str, str, str] | None:
    """Count a layer read in colours of no legend class and name it: the data needs an operator.

    Not tied to the job (which fails and refunds as any provider failure does): it is the
    data, whichever job met it first; alerted again within the hour for other colours only.
    """
    if not isinstance(exc, UnreadableTiles):
        return None
    return _unknown_colours(exc.path, exc.share, exc.colours)


def alerts(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Name each dataset a delivered report read off its unconfirmed legend: an operator checks.

    The report is the buyer's (the layer is uncertain, never lower); the legend third
    parties record is what needs correcting, so it is alerted as a failing legend is.
    """
    return [
        _unknown_colours(off["path"], off["share"], list(off["colours"]))
        for row in result.get("layers", ())
        for off in (row.get("unreadable") or {}).values()
    ]


def _unknown_colours(path: str, share: float, colours: list[str]) -> tuple[str, str, str]:
    metrics.UNKNOWN_COLOURS.labels(path).inc()
    return (
        "UNKNOWN_COLOURS",
        f"{path} {','.join(colours)}",
        f"{path}: {share:.1%} of the painted pixels are of no legend colour; "
        f"colours seen: {', '.join(colours)}",
    )


def steps(step: str, status: str) -> list[tuple[Layer, bool]]:
    """Return each hazard layer and whether it is fetched, as the job's step says."""
    if step.startswith(LAYERS_STEP):
        done = set(step[len(LAYERS_STEP) :].split(","))
    elif step == ANALYSING_STEP or status == "succeeded":
        done = {layer.key for layer in LAYERS}
    else:
        done = set()
    return [(layer, layer.key in done) for layer in LAYERS]


def written(result: dict[str, Any], lang: str | None) -> dict[str, Any]:
    """Return a kept report in lang (its own language when lang is none of ours), no fetch."""
    return translate(result, lang if lang in LANGS else result["lang"])


def kind(job_input: dict[str, Any] | None) -> str:
    """Return a job's kind for its typical time, as KIND says: "point" (a circle) or "place"."""
    return "point" if job_input and float(job_input.get("radius_m") or 0) > 0 else "place"


def shutdown() -> None:
    """End the pixel pool's processes with the jobs (a tile being worked finishes in its job)."""
    from .grid import pixels

    pixels.shutdown()


SAME_SPOT_M = 100.0  # two spots this close are read alike: their circles all but coincide


def finished_reports(user_id: int, area: Any) -> list[Any]:
    """Return the user's kept reports of an area (id, lang), newest first.

    A municipality is the same place by its code; a spot (a point or an address) is by
    distance, whatever its code says: two points SAME_SPOT_M apart in one ward are one
    spot, and a point and a municipality never are.
    """
    if not getattr(area, "radius_m", 0):
        where, params = "area->>'code' = :code", {"code": area.code}
    else:
        where = (
            "coalesce((area->>'radius_m')::float, 0) > 0 AND :m >= 111320 * sqrt("
            "power((area->>'lat')::float - :lat, 2)"
            " + power(((area->>'lon')::float - :lon) * cos(radians(:lat)), 2))"
        )
        params = {"lat": area.lat, "lon": area.lon, "m": SAME_SPOT_M}
    return db.session.execute(
        text(
            "SELECT id, lang FROM assessment_jobs"
            " WHERE user_id = :u AND status = 'succeeded' AND result IS NOT NULL"
            f" AND {where} ORDER BY finished_at DESC"
        ),
        {"u": user_id, **params},
    ).all()
