"""Long lists, a page at a time: `?page=N`, newest first, PER_PAGE rows a page."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flask import abort, request

PER_PAGE = 50


@dataclass(frozen=True)
class Page:
    """One page of a list and whether an older page follows it."""

    number: int
    rows: Sequence[Any]
    has_older: bool


def current_page(fetch: Callable[[int, int], Sequence[Any]]) -> Page:
    """Return the page that ?page= asks for; fetch(limit, offset) reads the rows.

    A page= that is not a positive whole number is a 400; a page past the end, a 404.
    """
    raw = request.args.get("page", "1")
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 6 and int(raw) >= 1):
        abort(400)
    number = int(raw)
    rows = fetch(PER_PAGE + 1, (number - 1) * PER_PAGE)  # one more tells if older ones exist
    if number > 1 and not rows:
        abort(404)
    return Page(number, rows[:PER_PAGE], len(rows) > PER_PAGE)
