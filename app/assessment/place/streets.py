"""Which 町丁目 (or 大字) a text meant, and the area and record of one.

In a municipality the text names (札幌市中央区北1条西2丁目, "Sangenjaya 2-chome, Setagaya"),
in the units a postal code covers, or typed alone (三軒茶屋, "Sangenjaya"): alone, it is
always offered as a choice, even one, and a name many municipalities have asks which first.
"""

import bisect
import dataclasses
import functools
import re
from collections.abc import Callable

from ..errors import N_, Named, PlaceAmbiguous, PlaceNotFound
from ..registers import addresses
from ..registers.keys import is_romaji, ja_key
from .area import Area, spot
from .gazetteer import Gazetteer, gazetteer
from .names import PART_SEPARATOR, the_one


def by_street(text: str, areas: list[Area], street: str) -> Area:
    """Place an address at its 町丁目's point, or say which 町丁目 it could be."""
    gaz = gazetteer()
    searched: list[tuple[Area, list[str]]] = []
    for area in dict.fromkeys(areas):
        codes = street_codes(gaz, area)
        if any(addresses.streets(code5) for code5 in codes):
            searched.append((area, codes))
    if not searched:  # no streets in the data for this unit: the municipality, as before
        return the_one(text, areas)
    found = [addresses.find(codes, street, kyoto=_kyoto(area)) for area, codes in searched]
    # One name at one point is one place, however often the data lists it (浜松市's old
    # wards' towns, under each unit that covers them).
    once = {(s.name, s.lat, s.lon): s for f in reversed(found) for s in reversed(f.streets)}
    hits = list(reversed(once.values()))
    if len(hits) == 1:
        rest = next(f.rest for f in found if f.streets)
        return street_area(hits[0], text, rest)
    if hits:  # each offered with the 番地 typed after it
        rests = {street: f.rest for f in found for street in f.streets}
        choices = [street_area(hit, text, rests[hit]) for hit in hits]
        raise streets_offered(text, choices)
    if len({area.code5 for area in areas}) > 1:
        return the_one(text, areas)  # which municipality, first
    area, codes = searched[0]
    as_of = addresses.meta()["snapshot"]
    raise PlaceNotFound(
        N_(
            '%(municipality)s has no 町丁目 or 大字 "%(street)s" in the address data '
            "(as of %(as_of)s). Check the spelling, or choose a close one."
        ),
        (street_area(hit, text, "") for hit in addresses.suggest(codes, street)),
        municipality=Named(area.prefecture_ja + area.name_ja, area.name_romaji),
        street=street,
        as_of=as_of,
    )


def street_in(codes: list[str], rest: str, text: str) -> Area | None:
    """Return the one 町丁目 the rest of a text names in these units (kanji or romaji)."""
    found = addresses.find(codes, rest)
    if not found.streets and is_romaji(rest):
        found = addresses.find_romaji(codes, rest)
    return street_area(found.streets[0], text, found.rest) if len(found.streets) == 1 else None


def street_part(text: str, tail: int) -> str:
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


def street_codes(gaz: Gazetteer, area: Area) -> list[str]:
    """Return the units whose streets an address in area is looked up in."""
    if area.code5 in gaz.former:  # an old ward's address (浜松市中区元城町): what it became
        return [unit.code5 for unit in gaz.former[area.code5].successors]
    return wards_of(area.code5) or [area.code5]  # a designated city: every ward's streets


@functools.cache
def wards_of(code5: str) -> list[str]:
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


def _kyoto(area: Area) -> bool:
    """Tell whether area is in Kyoto city, whose addresses may name its streets first."""
    return area.name_ja.startswith("京都市")


def street_area(street: addresses.Street, typed: str, rest: str) -> Area:
    """Return the area of an address: its 町丁目's point and a circle covering it."""
    unit = gazetteer().by_code5[street.code5]
    lat, lon = round(street.lat, 5), round(street.lon, 5)
    return spot(
        unit,
        lat,
        lon,
        street.radius_m,
        address=address_record(typed, unit, street, "chome", rest),
    )


def address_record(
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


STREETS = N_(
    '"%(query)s" fits %(num)d 町丁目 (or 大字): choose one, or add its 丁目 or the prefecture.'
)


def streets_offered(text: str, choices: list[Area]) -> PlaceAmbiguous:
    """Return the question of which 町丁目 the text meant, the choices offered free."""
    return PlaceAmbiguous(text, choices, [(STREETS, {"query": text, "num": len(choices)})])


def by_town(text: str, units: list[Area], street: str) -> Area:
    """Offer the 町丁目 typed without its municipality where it is: always as a choice,
    even one (a station or landmark may share a name with a 町丁目 far away: 三宮)."""
    if len(units) > addresses.MAX_CANDIDATES:
        raise _towns_offered(text, units, lambda u, codes: addresses.find(codes, street, _kyoto(u)))
    return _asked(text, by_street(text, units, street))


def romaji_town(text: str, units: list[Area]) -> Area:
    """Place a 町丁目 typed in romaji without its municipality, or offer where it is."""
    if len(units) > addresses.MAX_CANDIDATES:
        raise _towns_offered(text, units, lambda _, codes: addresses.find_romaji(codes, text))
    codes = [code5 for unit in units for code5 in street_codes(gazetteer(), unit)]
    found = addresses.find_romaji(codes, text)
    if 0 < len(found.streets) <= addresses.MAX_CANDIDATES:  # a choice, even one (by_town)
        choices = [street_area(street, text, found.rest) for street in found.streets]
        raise streets_offered(text, choices)
    # Its 丁目 is none of theirs (Sangenjaya 5-1), or too many fit: the town's 丁目 to
    # choose from, as for a 町丁目 a municipality lacks.
    town = addresses.find_romaji(codes, re.sub(r"[0-9].*", "", text)).streets
    raise PlaceNotFound(
        NO_TOWN_FITS,
        [street_area(street, text, "") for street in town[: addresses.MAX_CANDIDATES]],
        query=text,
    )


def _asked(text: str, area: Area) -> Area:
    """Raise a 町丁目 found without its municipality as a choice of one, to be confirmed."""
    if area.address:
        raise streets_offered(text, [area])
    return area


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
        found = find(unit, street_codes(gazetteer(), unit))
        if len(found.streets) == 1:
            area = street_area(found.streets[0], text, found.rest)
        elif found.streets:
            area = street_area(found.streets[0], text, "")
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


TOO_MANY_TOWNS = N_(
    '"%(query)s" names a 町丁目 (or 大字) in %(num)d municipalities: add its municipality, as'
    " in 東京都世田谷区三軒茶屋."
)
