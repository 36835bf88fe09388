"""What the resolver answers when a query names no one current place: each carries its choices."""

from collections.abc import Iterable

from .area import Area
from .gazetteer import Former

MAX_SUGGESTIONS = 5


class PlaceNotFound(ValueError):
    """No municipality matches the query; suggestions holds close matches, if any."""

    def __init__(self, message: str, suggestions: Iterable[Area] = ()) -> None:
        super().__init__(message)
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
    """Several municipalities match the query; choices lists them all, by code."""

    def __init__(self, query: str, choices: Iterable[Area]) -> None:
        self.choices: list[Area] = sorted(choices, key=lambda area: area.code)
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
        super().__init__(query, {area: None for f in formers for area in f.successors})
        self.args = (" ".join(_became(former) for former in formers) + " Choose where to assess.",)


def _became(former: Former) -> str:
    old, change = former.area, former.change
    if [area.name_ja for area in former.successors] == [old.name_ja]:
        return (
            f"{old.name_ja} ({old.name_romaji}) has the local-government code "
            f"{former.successors[0].code} since {change.date}, in place of {old.code}."
        )
    # Within one city, the ward's own name is enough: "became part of 中央区".
    city = old.name_ja[: old.name_ja.find("市") + 1] if "市" in old.name_ja[:-1] else ""
    names = [
        f"{area.name_ja.removeprefix(city)} ({area.name_romaji.split(' ')[-1]})"
        for area in former.successors
    ]
    return (
        f"{old.name_ja} ({old.name_romaji}) became part of {' and '.join(names)} on {change.date}."
    )
