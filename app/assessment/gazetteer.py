"""Japan's municipalities from the japancode package, indexed by every name a user types.

japancode (MIT) ships each municipality, ward of a designated city and prefecture with its
local-government code, kana reading and coordinates. Romaji are derived from the kana with
jaconv (MIT, pure Python) in simplified Hepburn: long vowels written once ("Chuo-ku", not
"Chūō-ku" or "Chuuou-ku").

Lookup keys are normalised so that script and spelling variants meet: Japanese keys are
NFKC, without spaces, katakana folded to hiragana and ヶ to ケ; romaji keys are lower-case
letters only, without diacritics, with long vowels, "oh" and m-before-b/m/p folded.
"""

import functools
import json
import re
import threading
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jaconv

from .area import Area, tiles_around

# Official name suffix -> the readings it takes and how each is romanised.
SUFFIX_KANA = {"市": ("し",), "区": ("く",), "町": ("ちょう", "まち"), "村": ("むら", "そん")}
SUFFIX_ROMAJI = {
    "し": "shi",
    "く": "ku",
    "ちょう": "cho",
    "まち": "machi",
    "むら": "mura",
    "そん": "son",
}
SUFFIX_ENGLISH = {"市": "city", "区": "ward", "町": "town", "村": "village"}

_KATAKANA_TO_HIRAGANA = {code: code - 0x60 for code in range(ord("ァ"), ord("ヶ") + 1)}


def ja_key(text: str) -> str:
    """Return the lookup key of Japanese text (kanji, hiragana or katakana)."""
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"[\s・]+", "", text).replace("ヶ", "ケ").replace("ヵ", "カ")
    return text.translate(_KATAKANA_TO_HIRAGANA).lower()


def romaji_key(text: str) -> str:
    """Return the lookup key of romaji text, tolerant of macrons and long-vowel spellings."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    # Word by word, so "Shimamoto-cho Osaka" does not fold into "shimamotochosaka".
    return "".join(_romaji_word(word) for word in re.split(r"[^a-z]+", text))


def _romaji_word(word: str) -> str:
    # ん is written n or m before b/m/p ("Gunma"/"Gumma"); っち as "tchi" or "cchi".
    word = re.sub(r"m(?=[bmp])", "n", word).replace("cch", "tch")
    # Long vowels: Tōkyō, Toukyou, Tookyoo, Tohkyoh all become "tokyo".
    word = re.sub(r"oh(?![aeiouy])", "o", word)
    return re.sub(r"uu+", "u", re.sub(r"o[ou]+", "o", word))


def is_romaji(text: str) -> bool:
    """Tell whether text is written in Latin letters (macrons allowed)."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text))
    return text.isascii() or all(ch.isascii() or unicodedata.combining(ch) for ch in text)


@dataclass(frozen=True)
class Prefecture:
    """A prefecture: its two-digit code, names and local-government code."""

    code2: str
    name_ja: str
    name_romaji: str
    code: str  # 6 digits, e.g. "130001" for Tokyo


@dataclass
class Gazetteer:
    """Every municipality, and the keys that find them."""

    areas: list[Area] = field(default_factory=list)
    by_code5: dict[str, Area] = field(default_factory=dict)
    prefectures: dict[str, Prefecture] = field(default_factory=dict)  # by code2
    # key -> areas; "full" keys carry the suffix (市/shi/city), "base" keys do not.
    ja_full: dict[str, list[Area]] = field(default_factory=lambda: defaultdict(list))
    ja_base: dict[str, list[Area]] = field(default_factory=lambda: defaultdict(list))
    romaji_full: dict[str, list[Area]] = field(default_factory=lambda: defaultdict(list))
    romaji_base: dict[str, list[Area]] = field(default_factory=lambda: defaultdict(list))
    # Prefecture keys -> code2. The "full" Japanese names (東京都) may start an address.
    ja_pref_full: dict[str, str] = field(default_factory=dict)
    ja_pref_short: dict[str, str] = field(default_factory=dict)
    romaji_pref: dict[str, str] = field(default_factory=dict)
    ward_codes: set[str] = field(default_factory=set)  # wards of designated cities

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


@functools.cache
def romanise(kana: str) -> str:
    """Return simplified Hepburn for a hiragana reading ("とうきょう" -> "tokyo")."""
    # jaconv's table, not pykakasi: pykakasi keeps a ~100 MiB kanji dictionary alive for
    # the life of the process, and only kana ever reaches this function. Hepburn marks
    # ん before a vowel (Kan'onji) and writes っち as tch (Kutchan).
    kana = re.sub("ん(?=[あいうえお])", "ん'", kana)
    hepburn = jaconv.kana2alphabet(kana).replace("cch", "tch")
    return re.sub(r"uu+", "u", re.sub(r"o[ou]+", "o", hepburn))


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
    """Read japancode's data and index every municipality and ward."""
    gaz = Gazetteer()
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
    for row in _load("municipalities.json"):
        code = row["lgcode"].zfill(6)
        parts = [
            _part(name, kana)
            for name, kana in zip(row["city"].split(), row["citykana"].split(), strict=True)
        ]
        pref = gaz.prefectures[code[:2]]
        area = Area(
            code=code,
            code5=code[:5],
            name_ja="".join(p.name for p in parts),
            name_kana="".join(p.kana for p in parts),
            name_romaji=" ".join(p.romaji for p in parts),
            prefecture_ja=pref.name_ja,
            prefecture_romaji=pref.name_romaji,
            lat=float(row["lat"]),
            lon=float(row["lng"]),
            tiles=tiles_around(float(row["lat"]), float(row["lng"])),
        )
        gaz.areas.append(area)
        gaz.by_code5[area.code5] = area
        _index_area(gaz, area, parts)
    return gaz


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
