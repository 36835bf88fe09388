"""The embedded PostgreSQL (pgserver) used when DATABASE_URL is unset."""

import logging
import os
import warnings
from pathlib import Path

from ..config import ROOT

log = logging.getLogger(__name__)


def start(pgdata: Path | None = None) -> str:
    """Start (or join) the embedded server in ./.pgdata and return its URL."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pgserver

        pgdata = pgdata or ROOT / ".pgdata"
        # Made here, not by pgserver: two processes starting at once (two test workers) both
        # found it missing and the second one's mkdir failed. Its initdb runs under a lock.
        pgdata.mkdir(exist_ok=True)
        server = pgserver.get_server(pgdata)
    url = server.get_uri()
    log.info("embedded PostgreSQL at %s", url)
    return url


def database_url() -> str:
    """Return DATABASE_URL, starting the embedded server when it is unset."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        url = start()
        # Child processes (gunicorn's worker, flask commands) join this server.
        os.environ["DATABASE_URL"] = url
    return url
