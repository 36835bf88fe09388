"""How long a job takes now: the median of the recent finished ones, read rarely.

The status poll shows the time left from this figure, so it must cost the poll nothing:
each process reads it at most once a minute (one SELECT over the last jobs), and a page
between reads uses the figure it has. None until some job has finished.

Jobs of one work may differ in kind (a point's report reads a few tiles around it, a
municipality's a whole outline: seconds against half a minute or more), so each kind has
its own median: a point is not told the cities' time. The work says which kind a job is
(its KIND in SQL, kind() in Python: app/jobs/work.py). seconds_left() turns the figure and
a job's progress into its time left.
"""

import math
import threading
import time
from typing import Any

from flask import current_app
from sqlalchemy import text

from ..extensions import db

REFRESH_SECONDS = 60.0
RECENT_JOBS = 50

# Jobs that did the work (not those made whole from the cache, which take no time): the
# last RECENT_JOBS of each kind, and the median of each kind and of all (ROLLUP's row,
# whose kind is NULL; a work's kind is never NULL).
RECENT_SQL = (
    "SELECT kind, percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) FROM ("
    "  SELECT seconds, kind, row_number() OVER (PARTITION BY kind ORDER BY finished_at DESC)"
    "    AS nth FROM ("
    "    SELECT extract(epoch FROM finished_at - started_at) AS seconds, finished_at,"
    "      coalesce(({kind})::text, '') AS kind FROM assessment_jobs"
    "    WHERE status = 'succeeded' AND started_at IS NOT NULL AND step <> 'Done from cache'"
    "      AND finished_at > now() - interval '7 days') done) recent"
    " WHERE nth <= :n GROUP BY ROLLUP (kind)"
)

_lock = threading.Lock()
_state: dict[str, Any] = {"seconds": {}, "read_at": float("-inf")}


def typical_seconds(kind: str | None = None) -> float | None:
    """Return the median duration of the recent jobs of a kind (None: of all), read at most
    once a minute."""
    now = time.monotonic()
    if now - _state["read_at"] >= REFRESH_SECONDS and _lock.acquire(blocking=False):
        try:
            _state["read_at"] = now  # a failed read waits its minute too: no query per poll
            recent = text(RECENT_SQL.format(kind=current_app.extensions["work"].KIND))
            rows = db.session.execute(recent, {"n": RECENT_JOBS})
            _state["seconds"] = {key: float(value) for key, value in rows if value is not None}
        finally:
            _lock.release()
    return _state["seconds"].get(kind)  # fresh enough, or another thread is reading it now


# The recent jobs' pace counts as much as this share of a typical job seen of this one.
PRIOR_SHARE = 0.25
# With no recent job to go by, a job says no time left before this much progress.
FIRST_PROGRESS = 10


def seconds_left(elapsed: float, progress: int, typical: float | None) -> int | None:
    """Return a running job's seconds left, halves rounded up, or None when unknown.

    The pace is the job's own progress over its seconds, with the typical job's pace
    counted as if a quarter of such a job had been seen too: before any progress the time
    left is the typical time less the seconds so far (nothing once past it), and the job's
    own pace takes over as it goes, gradually rather than by a switch of rule ("about 2
    min" then "about 5 s" eight seconds later, as the rule that switched said). A job at the
    typical pace is told the typical time less its seconds throughout. The page counts it
    on between polls the same way (static/js/job-elapsed.js).
    """
    if not 0 <= progress < 100:
        return None
    if typical and progress == 0:  # no pace of its own yet (setting out): none once past
        return max(1, math.floor(typical - elapsed + 0.5)) if elapsed < typical else None
    if typical:
        seen = PRIOR_SHARE * typical
        pace = (progress + 100 * PRIOR_SHARE) / (elapsed + seen)
    elif progress >= FIRST_PROGRESS and elapsed > 0:
        pace = progress / elapsed
    else:
        return None
    return max(1, math.floor((100 - progress) / pace + 0.5))


def forget() -> None:
    """Drop the figures, so the next call reads them (tests, and a new process)."""
    _state.update(seconds={}, read_at=float("-inf"))
