"""Which units a name names: the gazetteer's indexes read by a name's key.

Exactly (a suffix beats none, a city beats its namesakes without one), by the longest name
at a text's start, after or before a prefecture, or close to it (suggestions); then the one
unit meant, or the question of which (PlaceAmbiguous, PlaceSuperseded, a prefecture given).
"""

import difflib
import re
from collections.abc import Iterable, Iterator, Sequence

from ..errors import MAX_SUGGESTIONS, N_, Named, PlaceAmbiguous, PlaceNotFound, PlaceSuperseded
from ..registers.keys import ja_key
from .area import Area
from .gazetteer import Gazetteer, Prefecture, gazetteer

# What separates the parts of a place: 伊達市（北海道）, "Chuo-ku, Sapporo", 北海道、伊達市.
PART_SEPARATOR = re.compile(r"[,;、()\[\]【】「」]")

Index = dict[str, list[Area]]


def exact_names(
    gaz: Gazetteer, full: Index, base: Index, key: str, code2: str | None = None
) -> list[Area]:
    """Return the units key names exactly, with or without its suffix, in code2 if given."""
    # A name with its suffix (府中市) beats one without (府中 also names 府中町).
    if areas := in_prefecture(full.get(key, ()), code2):
        return areas
    areas = in_prefecture(base.get(key, ()), code2)
    # Without a suffix a name means the city by convention: 横浜 is 横浜市, not 横浜町.
    # Not over a namesake, though: "Minato" is Tokyo's 港区 as much as 大阪市港区 and
    # 名古屋市港区, so it asks which, as 港区 does.
    cities = [area for area in areas if gaz.is_city(area)]
    if len(cities) == 1 and not any(
        area is not cities[0] and area.name_ja.endswith(cities[0].name_ja) for area in areas
    ):
        return cities
    return areas


def in_prefecture(areas: Iterable[Area], code2: str | None) -> list[Area]:
    """Keep the areas in the prefecture code2 (all of them when it is None)."""
    return [area for area in areas if code2 is None or area.code[:2] == code2]


def longest_prefix(
    indexes: Sequence[Index], text: str, code2: str | None
) -> tuple[list[Area], int]:
    """Return the areas the longest name at text's start names, and where that name ends."""
    for end in range(len(text), 0, -1):
        for index in indexes:
            if areas := in_prefecture(index.get(text[:end], ()), code2):
                return areas, end
    return [], 0


def strip_prefecture(key: str, prefs: dict[str, str]) -> tuple[str | None, str]:
    """Split a leading prefecture name off key: ("13", "府中市...") or (None, key)."""
    starts = [pref_key for pref_key in prefs if key.startswith(pref_key)]
    if not starts:
        return None, key
    pref_key = max(starts, key=len)
    return prefs[pref_key], key[len(pref_key) :]


def ja_prefecture(gaz: Gazetteer, name: str) -> str | None:
    """Return the code of the prefecture a Japanese name names (東京都, 東京), if any."""
    key = ja_key(name)
    return gaz.ja_pref_full.get(key) or gaz.ja_pref_short.get(key)


def romaji_in_prefecture(gaz: Gazetteer, key: str) -> list[Area]:
    """Return the units a romaji key names together with their prefecture's name."""
    # The prefecture may come first ("Tokyo Fuchu") or last ("Fuchu-shi, Hiroshima").
    found: list[Area] = []
    for pref_key, code2 in gaz.romaji_pref.items():
        rests = []
        if key.startswith(pref_key):
            rests.append(key.removeprefix(pref_key))
        if key.endswith(pref_key):
            rests.append(key.removesuffix(pref_key))
        for rest in filter(None, rests):
            found += exact_names(gaz, gaz.romaji_full, gaz.romaji_base, rest, code2)
    return list(dict.fromkeys(found))


def the_one(query: str, areas: Iterable[Area]) -> Area:
    """Return the one current unit among areas; else ask which, or say what they became."""
    gaz = gazetteer()
    found = list(areas)
    # A current unit that shares an abolished one's name wins (浜松市天竜区, 2024); only
    # abolished units answer with what they became.
    choices = [area for area in found if gaz.is_current(area)]
    if not choices:
        raise PlaceSuperseded(query, [gaz.former[area.code5] for area in found])
    if len(choices) == 1:
        return choices[0]
    raise PlaceAmbiguous(query, choices)


def suggestions(key: str, indexes: Sequence[Index], code2: str | None = None) -> Iterator[Area]:
    """Yield current units whose names are close to key: what a PlaceNotFound offers."""
    # A generator: a postal code followed by a street reads the street as a name first,
    # and only a PlaceNotFound that reaches the user needs its suggestions.
    merged: Index = {}
    for index in indexes:
        for name, areas in index.items():
            merged.setdefault(name, []).extend(in_prefecture(areas, code2))
    current = gazetteer().is_current
    suggestions: dict[Area, None] = {}
    for name in difflib.get_close_matches(key, [k for k, v in merged.items() if v], n=20):
        suggestions.update(dict.fromkeys(filter(current, merged[name])))
    yield from list(suggestions)[:MAX_SUGGESTIONS]


def prefecture_given(gaz: Gazetteer, pref: Prefecture) -> PlaceNotFound:
    """Return the refusal of a prefecture typed alone, offering its cities."""
    # The lowest codes are the capital and the largest cities: useful first choices.
    cities = sorted(
        (area for area in gaz.areas if area.code[:2] == pref.code2 and not gaz.is_ward(area)),
        key=lambda area: area.code,
    )
    return PlaceNotFound(
        N_(
            "%(prefecture)s is a prefecture, not a municipality: "
            "add the city, ward, town or village."
        ),
        cities,
        prefecture=Named(pref.name_ja, pref.name_romaji, romaji_first=True),
    )
