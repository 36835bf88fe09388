"""Turn what a user typed into one municipality, or say clearly why not.

Accepted forms:
- a name in kanji, hiragana or katakana, with or without its suffix: 札幌市, 札幌, さっぽろし,
  サッポロ;
- romaji in any case, with or without the suffix or macrons: Sapporo, Sapporo-shi,
  "sapporo shi", "Sapporo City", Kyōto, Kyouto; optionally with the prefecture before or
  after it: "Fuchu, Tokyo", "Hiroshima Fuchu-shi";
- the prefecture after the name, in brackets or not: 伊達市（北海道）, 府中市 東京都;
- an address that starts with a municipality, optionally after its prefecture:
  北海道札幌市中央区北1条西2丁目 (the longest name at the start wins);
- a romaji address in Western order, most specific part first, parts separated by commas:
  "1-1 Marunouchi, Chiyoda-ku, Tokyo", "Kita 1 Nishi 2, Chuo-ku, Sapporo" (the longest run
  of trailing parts that names a place wins);
- any of these after a postal code (〒160-0023, 1600023), which is ignored: a postal code
  alone is refused, since it names a district, not a municipality;
- the local-government code: 5 digits, or 6 whose last is the check digit (validated).

Wards of designated cities are places of their own, with their own code and coordinates,
because a ward is the finer area and hazards differ across a city. So 札幌市 and "Sapporo"
resolve to the city, while an address or a name that includes the ward (札幌市中央区北1条,
"Sapporo Chuo-ku", "Chuo-ku, Sapporo") resolves to the ward; "Kita-ku, Osaka" is the ward of
Osaka city, not either Kita-ku of Osaka prefecture. A bare ward name shared by several cities
(中央区, 北区) is ambiguous unless the prefecture or city is given. Tokyo's 23 special wards are
municipalities and behave like cities.

A name several municipalities share (府中市, 伊達市, 森町, "Yamagata-shi" for 山形市 and 山県市)
raises PlaceAmbiguous with every choice: an assessment costs a point, so we do not guess.
One convention is applied: a name without its suffix means the city when exactly one city
(or Tokyo special ward) has it, as in speech: 横浜 and "Yokohama" are 横浜市, not 横浜町;
金沢 is 金沢市, not 横浜市金沢区; but 府中 (two cities) stays ambiguous.
Romaji words must be plain: "S.a.p.p.o.r.o", "sap/poro" or "Sapporo-----" match nothing (the
error suggests Sapporo), because reading through punctuation would accept anything at all.
"""

import difflib
import re
import unicodedata
from collections.abc import Iterable, Sequence

from .area import Area
from .gazetteer import (
    Gazetteer,
    Prefecture,
    check_digit,
    gazetteer,
    is_romaji,
    ja_key,
    romaji_key,
)

__all__ = ["Area", "PlaceAmbiguous", "PlaceNotFound", "resolve_place"]

MAX_SUGGESTIONS = 5

# Japanese postal codes: 3 digits, a hyphen (of any width or style) or none, 4 digits.
POSTAL_CODE = re.compile(r"(?:〒\s*)?([0-9]{3}[-‐‑‒–—―−ー]?[0-9]{4})(?![0-9])")
# What separates the parts of a place: 伊達市（北海道）, "Chuo-ku, Sapporo", 北海道、伊達市.
PART_SEPARATOR = re.compile(r"[,;、()\[\]【】「」]")
# A romaji word of a name: letters, with a hyphen or apostrophe between letters (Kan'onji-shi).
NAME_WORD = re.compile(r"[a-z]+(?:['-][a-z]+)*")

Index = dict[str, list[Area]]


def N_(text: str) -> str:  # noqa: N802 - gettext's usual name: marked for the catalog
    """Mark a message for translation; the web layer words it in the user's language."""
    return text


class PlaceNotFound(ValueError):
    """No municipality matches the query; suggestions holds close matches, if any.

    template and params are the message's parts, so a page can word it in its own
    language; str() is the English.
    """

    def __init__(self, template: str, suggestions: Iterable[Area] = (), **params: str) -> None:
        super().__init__(template % params if params else template)
        self.template = template
        self.params = params
        self.suggestions: list[Area] = list(suggestions)[:MAX_SUGGESTIONS]


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


def resolve_place(query: str) -> Area:
    """Return the one municipality the query names, or raise PlaceNotFound/PlaceAmbiguous."""
    text = unicodedata.normalize("NFKC", query).strip()
    if not text:
        raise PlaceNotFound(
            N_("Type a place: a municipality's name, an address, or its local-government code.")
        )
    if postal := POSTAL_CODE.match(text):
        text = text[postal.end() :].lstrip(" ,、")
        if not text:
            raise PlaceNotFound(
                N_(
                    "%(postal)s looks like a postal code. We need the municipality's name "
                    "or its local-government code."
                ),
                postal=postal[1],
            )
    digits = re.sub(r"[\s-]", "", text)  # "01100-2" and "011 002" are codes too
    if digits.isascii() and digits.isdigit():
        return _by_code(digits)
    if is_romaji(text):
        return _by_romaji(text)
    return _by_japanese(text)


def _by_code(digits: str) -> Area:
    gaz = gazetteer()
    if len(digits) not in (5, 6):
        raise PlaceNotFound(
            N_(
                "%(digits)s is not a local-government code: those have 5 digits, "
                "or 6 with the check digit."
            ),
            digits=digits,
        )
    code5 = digits[:5]
    if len(digits) == 6 and digits[5] != (expected := check_digit(code5)):
        raise PlaceNotFound(
            N_(
                "%(digits)s is not a valid local-government code: the check digit of "
                "%(code5)s is %(expected)s, not %(given)s."
            ),
            [gaz.by_code5[code5]] if code5 in gaz.by_code5 else [],
            digits=digits,
            code5=code5,
            expected=expected,
            given=digits[5],
        )
    if code5 in gaz.by_code5:
        return gaz.by_code5[code5]
    for pref in gaz.prefectures.values():
        if pref.code[:5] == code5:
            raise _prefecture_given(gaz, pref)
    raise PlaceNotFound(
        N_("No municipality has the local-government code %(digits)s."), digits=digits
    )


def _by_japanese(text: str) -> Area:
    gaz = gazetteer()
    parts = PART_SEPARATOR.sub(" ", text).split()
    # The prefecture may follow the name: 伊達市（北海道）, 府中市 東京都.
    code2 = _ja_prefecture(gaz, parts[-1]) if len(parts) > 1 else None
    key = ja_key("".join(parts[:-1] if code2 else parts))
    if areas := _exact(gaz, gaz.ja_full, gaz.ja_base, key, code2):
        return _one(text, areas)
    if pref := _ja_prefecture(gaz, key):
        raise _prefecture_given(gaz, gaz.prefectures[pref])
    lead2, rest = _strip_prefecture(key, gaz.ja_pref_full)
    if lead2 and code2 and lead2 != code2:
        raise PlaceNotFound(N_('"%(query)s" names two different prefectures.'), query=text)
    code2 = code2 or lead2
    areas = _exact(gaz, gaz.ja_full, gaz.ja_base, rest, code2) or _longest_prefix(
        gaz.ja_full, rest, code2
    )
    if areas:
        return _one(text, areas)
    raise PlaceNotFound(
        N_('No municipality matches "%(query)s".'),
        _suggest(rest, (gaz.ja_full, gaz.ja_base), code2),
        query=text,
    )


def _ja_prefecture(gaz: Gazetteer, name: str) -> str | None:
    key = ja_key(name)
    return gaz.ja_pref_full.get(key) or gaz.ja_pref_short.get(key)


def _by_romaji(text: str) -> Area:
    gaz = gazetteer()
    plain = "".join(ch for ch in unicodedata.normalize("NFKD", text) if ch.isascii()).lower()
    words = [
        (number, word)
        for number, part in enumerate(PART_SEPARATOR.split(plain))
        for word in part.split()
    ]
    # A country and a postal code close a Western address: "Chiyoda-ku, Tokyo 100-0005, Japan".
    while len(words) > 1 and (words[-1][1] == "japan" or POSTAL_CODE.fullmatch(words[-1][1])):
        words.pop()
    # Most specific part first, so leading parts may be the street ("1-1 Marunouchi, ..."):
    # try the trailing parts, longest run first.
    starts = [i for i, (number, _) in enumerate(words) if i == 0 or words[i - 1][0] != number]
    for start in starts:
        run = [word for _, word in words[start:]]
        # Reading through digits or punctuation in a word would make "S.a.p.p.o.r.o" Sapporo.
        if not all(NAME_WORD.fullmatch(word) for word in run):
            continue
        key = romaji_key(" ".join(run))
        key = key.removesuffix("japan") or key
        if areas := _exact(gaz, gaz.romaji_full, gaz.romaji_base, key):
            return _one(text, areas)
        if start == 0 and key in gaz.romaji_pref:
            raise _prefecture_given(gaz, gaz.prefectures[gaz.romaji_pref[key]])
        if areas := _romaji_in_prefecture(gaz, key):
            return _one(text, areas)
    key = romaji_key(text)
    raise PlaceNotFound(
        N_('No municipality matches "%(query)s".'),
        _suggest(key.removesuffix("japan") or key, (gaz.romaji_full, gaz.romaji_base)),
        query=text,
    )


def _romaji_in_prefecture(gaz: Gazetteer, key: str) -> list[Area]:
    # The prefecture may come first ("Tokyo Fuchu") or last ("Fuchu-shi, Hiroshima").
    found: list[Area] = []
    for pref_key, code2 in gaz.romaji_pref.items():
        rests = []
        if key.startswith(pref_key):
            rests.append(key.removeprefix(pref_key))
        if key.endswith(pref_key):
            rests.append(key.removesuffix(pref_key))
        for rest in filter(None, rests):
            found += _exact(gaz, gaz.romaji_full, gaz.romaji_base, rest, code2)
    return list(dict.fromkeys(found))


def _in_pref(areas: Iterable[Area], code2: str | None) -> list[Area]:
    return [area for area in areas if code2 is None or area.code[:2] == code2]


def _exact(
    gaz: Gazetteer, full: Index, base: Index, key: str, code2: str | None = None
) -> list[Area]:
    # A name with its suffix (府中市) beats one without (府中 also names 府中町).
    if areas := _in_pref(full.get(key, ()), code2):
        return areas
    areas = _in_pref(base.get(key, ()), code2)
    # Without a suffix a name means the city by convention: 横浜 is 横浜市, not 横浜町.
    cities = [area for area in areas if gaz.is_city(area)]
    return cities if len(cities) == 1 else areas


def _longest_prefix(full: Index, text: str, code2: str | None) -> list[Area]:
    for end in range(len(text), 0, -1):
        if areas := _in_pref(full.get(text[:end], ()), code2):
            return areas
    return []


def _strip_prefecture(key: str, prefs: dict[str, str]) -> tuple[str | None, str]:
    """Split a leading prefecture name off key: ("13", "府中市...") or (None, key)."""
    starts = [pref_key for pref_key in prefs if key.startswith(pref_key)]
    if not starts:
        return None, key
    pref_key = max(starts, key=len)
    return prefs[pref_key], key[len(pref_key) :]


def _one(query: str, areas: Iterable[Area]) -> Area:
    choices = list(areas)
    if len(choices) == 1:
        return choices[0]
    raise PlaceAmbiguous(query, choices)


def _suggest(key: str, indexes: Sequence[Index], code2: str | None = None) -> list[Area]:
    merged: Index = {}
    for index in indexes:
        for name, areas in index.items():
            merged.setdefault(name, []).extend(_in_pref(areas, code2))
    suggestions: dict[Area, None] = {}
    for name in difflib.get_close_matches(key, [k for k, v in merged.items() if v], n=20):
        suggestions.update(dict.fromkeys(merged[name]))
    return list(suggestions)[:MAX_SUGGESTIONS]


def _prefecture_given(gaz: Gazetteer, pref: Prefecture) -> PlaceNotFound:
    # The lowest codes are the capital and the largest cities: useful first choices.
    cities = sorted(
        (area for area in gaz.areas if area.code[:2] == pref.code2 and not gaz.is_ward(area)),
        key=lambda area: area.code,
    )
    return PlaceNotFound(
        N_(
            "%(prefecture_romaji)s (%(prefecture_ja)s) is a prefecture, not a municipality: "
            "add the city, ward, town or village."
        ),
        cities,
        prefecture_romaji=pref.name_romaji,
        prefecture_ja=pref.name_ja,
    )
