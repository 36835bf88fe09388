"""Log lines: readable text with timestamps by default, JSON lines with LOG_FORMAT=json."""

import logging

from pythonjsonlogger.json import JsonFormatter

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The event fields (job_id, user_id, transition, outcome...) join these as keys.
JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s"


def json_formatter() -> logging.Formatter:
    """Return the JSON lines formatter (gunicorn.conf.py names it for gunicorn's lines)."""
    return JsonFormatter(JSON_FIELDS, rename_fields={"asctime": "time", "levelname": "level"})


def formatter(log_format: str) -> logging.Formatter:
    """Return the formatter LOG_FORMAT names ("json", else text)."""
    return json_formatter() if log_format == "json" else logging.Formatter(TEXT)


def configure(log_format: str) -> None:
    """Log at INFO to stderr, formatting the root logger's lines by LOG_FORMAT."""
    logging.basicConfig(level=logging.INFO, format=TEXT)
    if log_format != "json":
        return  # text: as basicConfig (or gunicorn's own set-up) made it
    chosen = formatter(log_format)
    for handler in logging.getLogger().handlers:
        if type(handler).__module__.startswith("_pytest"):
            continue  # pytest's capture keeps its own format
        handler.setFormatter(chosen)
