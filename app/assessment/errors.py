"""The assessment package's errors: what the resolver answers, and what a provider raises.

A query that names no one current place gets PlaceNotFound, PlaceAmbiguous or
PlaceSuperseded, each carrying its choices. Each keeps its words as parts (a message
template and its values), so a page can put them in the reader's language
(app/web/i18n.py place_message); str() is the English. A service that cannot be asked
raises UpstreamError; a dataset that cannot be read, ProviderError; a stopped job, Stopped.
Every sub-package may import this module; it imports nothing of the package at run time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for the type checker only: errors.py imports nothing of the package
    from .place.area import Area
    from .place.gazetteer import Former

MAX_SUGGESTIONS = 5

# A message and its values; a list value is a list of names ("A and B" in English).
Part = tuple[str, Mapping[str, Any]]


def N_(text: str) -> str:  # noqa: N802 - gettext's usual name: marked for the catalog
    """Mark a message for translation; the web layer words it in the user's language."""
    return text


@dataclass(frozen=True)
class Named:
    """A place's name as a message value: Japanese alone in Japanese, both in English."""

    ja: str
    romaji: str
    romaji_first: bool = False  # "Tokyo (東京都)" rather than "浜松市中区 (Hamamatsu-shi Naka-ku)"

    def __str__(self) -> str:
        return f"{self.romaji} ({self.ja})" if self.romaji_first else f"{self.ja} ({self.romaji})"


def english(parts: Iterable[Part]) -> str:
    """Word message parts in English, as the catalogs' msgids are."""
    return " ".join(
        template
        % {k: " and ".join(map(str, v)) if isinstance(v, list) else v for k, v in params.items()}
        if params
        else template
        for template, params in parts
    )


class PlaceNotFound(ValueError):
    """No municipality matches the query; suggestions holds close matches, if any."""

    def __init__(self, template: str, suggestions: Iterable[Area] = (), **params: Any) -> None:
        self.parts: list[Part] = [(template, params)]
        super().__init__(english(self.parts))
        self._found: Iterable[Area] = suggestions
        self._suggestions: list[Area] | None = None
        self._total = 0

    @property
    def suggestions(self) -> list[Area]:
        """Return the close matches, found on first use: a fuzzy search costs milliseconds."""
        self._find()
        return self._suggestions or []

    @property
    def total(self) -> int:
        """Return how many places matched, so the page can say it shows only some."""
        self._find()
        return self._total

    def _find(self) -> None:
        if self._suggestions is None:
            every = list(self._found)
            self._suggestions, self._total = every[:MAX_SUGGESTIONS], len(every)


class PlaceAmbiguous(ValueError):
    """Several municipalities match the query; choices lists them all, by code.

    parts is None for the plain "matches N places" answer, which a page words itself
    (its prefectures are named in the page's language); else the message's parts.
    """

    def __init__(self, query: str, choices: Iterable[Area], parts: list[Part] | None = None):
        self.query = query
        self.choices: list[Area] = sorted(choices, key=lambda area: area.code)
        self.parts = parts
        if parts is not None:
            super().__init__(english(parts))
            return
        prefectures = list(dict.fromkeys(area.prefecture_romaji for area in self.choices))
        where = " and ".join(filter(None, [", ".join(prefectures[:-1]), prefectures[-1]]))
        super().__init__(
            f'"{query}" matches {len(self.choices)} places, in {where}. '
            "Add the prefecture, or choose one by its local-government code."
        )


class PlaceSuperseded(PlaceAmbiguous):
    """The query names units that no longer exist; choices lists the current ones."""

    def __init__(self, query: str, formers: Iterable[Former]) -> None:
        formers = list(formers)
        parts = [_became(former) for former in formers] + [(N_("Choose where to assess."), {})]
        super().__init__(query, {area: None for f in formers for area in f.successors}, parts)


def _became(former: Former) -> Part:
    old, change = former.area, former.change
    was = Named(old.name_ja, old.name_romaji)
    if [area.name_ja for area in former.successors] == [old.name_ja]:
        return (
            N_(
                "%(old)s has the local-government code %(code)s since %(date)s, "
                "in place of %(was)s."
            ),
            {"old": was, "code": former.successors[0].code, "date": change.date, "was": old.code},
        )
    # Within one city, the ward's own name is enough: "became part of 中央区".
    city = old.name_ja[: old.name_ja.find("市") + 1] if "市" in old.name_ja[:-1] else ""
    names = [
        Named(area.name_ja.removeprefix(city), area.name_romaji.split(" ")[-1])
        for area in former.successors
    ]
    return (
        N_("%(old)s became part of %(new)s on %(date)s."),
        {"old": was, "new": names, "date": change.date},
    )


class ProviderError(Exception):
    """An upstream dataset could not be fetched or made no sense."""

    def __init__(self, dataset: str, key: str, reason: str, detail: str = "") -> None:
        # reason is for the user; the key and the detail (an OS error, say) are for the log.
        where = f'hazard dataset "{dataset}" for {key}'
        super().__init__(f"{where}: {reason} ({detail})" if detail else f"{where}: {reason}")
        self.dataset = dataset
        self.key = key
        self.reason = reason
        self.detail = detail

    def __reduce__(self) -> tuple:
        # As built, so that it crosses to the job's thread from the work's process whole.
        return type(self), (self.dataset, self.key, self.reason, self.detail)


class UnreadableTiles(ProviderError):
    """A zone dataset's tiles are painted in colours of no class of its legend: an outage."""

    def __init__(self, dataset: str, path: str, share: float, colours: Mapping[str, int]):
        seen = sorted(colours.items(), key=lambda item: -item[1])[:8]
        self.seen = dict(seen)
        self.path = path
        self.share = share
        self.colours = [colour for colour, _ in seen]
        reason = (
            f"the hazard map portal's {path} tiles are painted in colours its published "
            f"legend does not have ({share:.0%} of the painted pixels): the layer cannot be read"
        )
        super().__init__(dataset, path, reason, "colours seen: " + ", ".join(self.colours))

    def __reduce__(self) -> tuple:
        return type(self), (self.dataset, self.path, self.share, self.seen)


class ProviderFailure(Exception):
    """A real provider's call failed for a reason the user can read (dataset not yet known)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


class UpstreamError(Exception):
    """A service could not be asked, or answered with an error; status is its HTTP code."""

    def __init__(self, reason: str, status: int | None = None, detail: str = "") -> None:
        super().__init__(f"{reason} ({detail})" if detail else reason)
        self.reason = reason
        self.status = status
        self.detail = detail


class Stopped(Exception):
    """The job stopped (reaped, shut down): a fetch gives up instead of calling upstream."""
