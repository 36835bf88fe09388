"""How long an assessment takes now: the median of the recent finished ones, read rarely.

The status poll shows the time left from this figure, so it must cost the poll nothing:
each process reads it at most once a minute (one SELECT over the last jobs), and a page
between reads uses the figure it has. None until some job has finished.
"""

import threading
import time

from sqlalchemy import text

from ..extensions import db

REFRESH_SECONDS = 60.0
RECENT_JOBS = 50

# Jobs that did the work (not those made whole from the cache, which take no time).
RECENT_SQL = text(
    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) FROM ("
    "  SELECT extract(epoch FROM finished_at - started_at) AS seconds FROM assessment_jobs"
    "  WHERE status = 'succeeded' AND started_at IS NOT NULL AND step <> 'Done from cache'"
    "    AND finished_at > now() - interval '7 days'"
    "  ORDER BY finished_at DESC LIMIT :n) recent"
)

_lock = threading.Lock()
_state = {"seconds": None, "read_at": float("-inf")}


def typical_seconds() -> float | None:
    """Return the median duration of the recent jobs, read at most once a minute."""
    now = time.monotonic()
    if now - _state["read_at"] < REFRESH_SECONDS or not _lock.acquire(blocking=False):
        return _state["seconds"]  # fresh enough, or another thread is reading it now
    try:
        _state["read_at"] = now  # a failed read waits its minute too: no query per poll
        value = db.session.execute(RECENT_SQL, {"n": RECENT_JOBS}).scalar()
        _state["seconds"] = float(value) if value is not None else None
    finally:
        _lock.release()
    return _state["seconds"]


def forget() -> None:
    """Drop the figure, so the next call reads it (tests, and a new process)."""
    _state.update(seconds=None, read_at=float("-inf"))
