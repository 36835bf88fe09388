"""Streets: a municipality's 町丁目 (and 大字) with a point each, and reading what people type.

data/addresses.zip is built by scripts/build_addresses.py from Geolonia 住所データ (CC BY
4.0; its docstring says how, index.json inside records the source, commit and snapshot
date). Each municipality is its own zip member, read on first use (about 2 ms) and kept in a
small LRU, so a worker holds only the streets of the places it is asked about.

What people type is read through one key (town_key), applied alike to the data's names
and to the text: widths (NFKC), spaces, katakana as hiragana, ヶ/ケ/が and 之/ノ/の as one,
old kanji forms as new, kanji numerals as digits (kanjize: 一丁目, 1丁目 and １丁目 meet), and
hyphen-like marks after a digit as "-". A 町丁目 is then found by its name at the start of
the text, its 丁目 given as "1丁目", "一丁目", "1-" or a bare "1" at the end; what follows
(番地・号, "9-1", "9番1号") is kept as typed, for the record and for GSI's search.
"""

import bisect
import difflib
import functools
import json
import math
import os
import re
import threading
import unicodedata
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

from kanjize import kanji2number

from .keys import hiragana, romaji_key, romanise, romanise_name

# A 町丁目's circle: at least the point report's 500 m, at most what the area's tiles hold
# (a one-tile box around the point, area.tiles_around: about ±4.9 km at z12).
MIN_RADIUS_M = 500.0
MAX_RADIUS_M = 4000.0
MAX_CANDIDATES = 12
STREETS_KEPT = 32  # municipalities whose streets a process keeps (about 120 KiB each)
METRES_PER_DEGREE_LAT = 111_320.0

# Old and variant forms of kanji met in place names, each to the form the data uses.
_VARIANTS = str.maketrans(
    "澤邊邉濱齋齊廣國條曾藪渕舘嶋龍惠榮檜鐵驛關寶萬圓縣塚瀧櫻斎冨槇籠岡峯嶌",
    "沢辺辺浜斉斉広国条曽薮淵館島竜恵栄桧鉄駅関宝万円県塚滝桜斉富槙篭岡峰島",
)
_NUMERAL = re.compile(r"[〇一二三四五六七八九十百千]+")
_HYPHEN = re.compile(r"(?<=[0-9])\s*[-‐‑‒–—―−ー－ｰ─━~〜]\s*(?=[0-9])")
_CHOME = re.compile(r"(.*?)([0-9]+)丁目")
# What may follow a 丁目 number typed without 丁目: a hyphen, the 番地, or the end.
_AFTER_CHOME = re.compile(r"([0-9]+)(丁目|丁|-|の(?=[0-9])|$)")
_lock = threading.Lock()


def _number(match: re.Match[str]) -> str:
    text = match[0]
    try:
        return str(kanji2number(text))
    except Exception:  # "一二" is two digits to kanjize's eye, not a number: read them as such
        return text.translate(str.maketrans("〇一二三四五六七八九", "0123456789"))


@functools.lru_cache(maxsize=4096)
def town_key(text: str) -> str:
    """Return the key a 町丁目's name is found by, in the data and in what people type."""
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"[\s・]+", "", text).replace("ヶ", "が").replace("ケ", "が").replace("ヵ", "か")
    text = hiragana(text.translate(_VARIANTS)).replace("之", "の").replace("ノ", "の")
    text = _NUMERAL.sub(_number, text)
    return _HYPHEN.sub("-", text)


@dataclass(frozen=True, slots=True)
class Street:
    """One 町丁目 or 大字: its name, representative point and estimated extent."""

    code5: str  # the municipality or ward it is in
    name: str  # as the data writes it: 丸の内一丁目
    lat: float
    lon: float
    extent_m: float  # how far its ground reaches from the point (estimated: see the script)
    reading: str = ""  # Japan Post's reading of the town, in hiragana ("" if it lists none)

    @property
    def radius_m(self) -> float:
        """Return the circle a report reads: 500 m unless the 町丁目 is larger."""
        return min(max(MIN_RADIUS_M, self.extent_m), MAX_RADIUS_M)

    @property
    def romaji(self) -> str:
        """Return the name in romaji, from its reading ("Sangenjaya 2-chome"), or "".

        A reading with numbers in it (札幌's 北10条西, きた10じょうにし) has none: its numbers
        are part of the name, where typed romaji puts the 丁目 and the 番地.
        """
        if not romanisable(self.reading):
            return ""
        chome = base_of(self.name)[1]
        name = romanise_name(self.reading, self.name).capitalize()
        return f"{name} {chome}-chome" if chome else name


@dataclass(frozen=True, slots=True)
class _Entry:
    street: Street
    base: str  # the key without the 丁目 number, without a leading 大字/字
    chome: int | None


@dataclass(frozen=True)
class Found:
    """What the text matched: the streets (one, or the candidates) and the rest typed."""

    streets: tuple[Street, ...]
    rest: str = ""  # the 番地・号 after the 町丁目, as typed


def _archive() -> zipfile.ZipFile:
    return zipfile.ZipFile(str(resources.files(__package__).joinpath("data", "addresses.zip")))


_opened: tuple[int, zipfile.ZipFile] | None = None


def _read(name: str) -> bytes:
    """Read one member through the process's own open archive (its index costs ~10 ms)."""
    global _opened
    with _lock:
        if _opened is None or _opened[0] != os.getpid():  # a forked worker opens its own
            _opened = (os.getpid(), _archive())
        return _opened[1].read(name)


@functools.lru_cache(maxsize=1)
def meta() -> dict[str, Any]:
    """Return where the streets come from (source, licence, credit, commit, snapshot)."""
    return json.loads(_read("index.json"))["meta"]


@functools.lru_cache(maxsize=STREETS_KEPT)
def streets(code5: str) -> tuple[_Entry, ...]:
    """Return a municipality's streets, read from the archive on first use."""
    try:
        text = _read(f"{code5}.tsv").decode("utf-8")
    except KeyError:
        return ()
    found = []
    for line in text.splitlines():
        name, lat, lon, extent, reading = line.split("\t")
        street = Street(code5, name, float(lat), float(lon), float(extent), reading)
        found.append(_Entry(street, *base_of(name)))
    return tuple(found)


# "2-chome", "2 chome", "2chōme": the 丁目 of a street typed in romaji.
_ROMAJI_CHOME = re.compile(r"(\d+)\s*-?\s*cho+me\b")


def romanisable(reading: str) -> bool:
    """Tell whether a town's reading gives it a romaji name: kana only, no numbers."""
    return bool(reading) and not re.search(r"[0-9]", reading)


def _romaji_words(text: str) -> tuple[str, str]:
    """Return (the plain lower-case ASCII of romaji text, the key of its name alone)."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", text) if c.isascii()).lower()
    name = re.sub(r"\d+|cho+me\b", " ", _ROMAJI_CHOME.sub(" ", plain))
    return plain, romaji_key(name)


# A misspelt town's reading: the nearest few readings of its municipality's towns by
# difflib's ratio (sangenchaya against sangenjaya: 0.95; minami against minamiota, 0.8, is
# another name, not a slip), for names of five letters or more.
CLOSE_TOWNS, CLOSE_CUTOFF, CLOSE_MIN_LETTERS = 3, 0.85, 5


@functools.lru_cache(maxsize=STREETS_KEPT)
def _by_romaji(code5: str) -> dict[str, list[_Entry]]:
    index: dict[str, list[_Entry]] = {}
    for entry in streets(code5):
        if romanisable(entry.street.reading):
            index.setdefault(romaji_key(romanise(entry.street.reading)), []).append(entry)
    return index


def find_romaji(codes: list[str], text: str, close: bool = False) -> Found:
    """Find the 町丁目 that text in romaji names, by its reading: "Sangenjaya 2-chome",
    "Sangenjaya 2-1-1", "1-9-1 Marunouchi". The first number is the 丁目 (unless "chome"
    marks another) where the town has 丁目; the numbers left are the 番地, kept as typed.

    close: the towns whose reading is nearest a misspelt one instead ("Sangenchaya" finds
    Sangenjaya): candidates to offer, never a place to assess unasked.
    """
    plain, key = _romaji_words(text)
    marked = _ROMAJI_CHOME.search(plain)
    numbers = re.findall(r"\d+", _ROMAJI_CHOME.sub(" ", plain))
    keys = [key]
    if close and len(key) >= CLOSE_MIN_LETTERS:
        readings = {k for code5 in codes for k in _by_romaji(code5)}
        if key in readings:  # spelt right, and fit too many to offer: nothing to correct
            return Found(())
        keys = difflib.get_close_matches(key, readings, n=CLOSE_TOWNS, cutoff=CLOSE_CUTOFF)
    entries = [entry for code5 in codes for k in keys for entry in _by_romaji(code5).get(k, ())]
    if not key or not entries:
        return Found(())
    if not marked and not numbers:  # a town of several 丁目, none typed: each is a choice
        return Found(tuple(entry.street for entry in entries))
    chome = int(marked[1]) if marked else int(numbers[0])
    if fits := [entry.street for entry in entries if entry.chome == chome]:
        return Found(tuple(fits), "-".join(numbers if marked else numbers[1:]))
    # Towns without 丁目: the numbers are the 番地.
    return Found(tuple(e.street for e in entries if e.chome is None), "-".join(numbers))


def romaji_of(code5: str, name: str) -> str:
    """Return a municipality's 町丁目 in romaji ("Sangenjaya 2-chome"), or "" if unknown;
    a town of several 丁目 named without one ("三軒茶屋") by its 丁目's reading."""
    if found := next((e.street.romaji for e in streets(code5) if e.street.name == name), ""):
        return found
    base = base_of(name)[0]
    towns = (e.street for e in streets(code5) if e.chome is not None and e.base == base)
    named = (romanise_name(s.reading, s.name) for s in towns if romanisable(s.reading))
    return next((romaji.capitalize() for romaji in named), "")


def street_en(code5: str, name: str) -> str:
    """Name a 町丁目 for an English reader: its romaji, then its kanji (or the kanji alone)."""
    romaji = romaji_of(code5, name)
    return f"{romaji} ({name})" if romaji else name


def base_of(name: str) -> tuple[str, int | None]:
    """Return a 町丁目's key without a leading 大字/字 and its 丁目, and the 丁目 (or None)."""
    key = re.sub(r"^大?字", "", town_key(name))
    chome = _CHOME.fullmatch(key)
    return (chome[1], int(chome[2])) if chome else (key, None)


def town_index(members: dict[str, str]) -> dict[str, str]:
    """Return the archive's town index from its {code5: tsv text} members.

    One member per group of first characters of a 町丁目's base key (base_of) or its
    romaji key, its lines "key<TAB>code5 code5 ...", sorted: the municipalities that have a
    町丁目 of that name or reading.
    scripts/build_addresses.py writes it into the archive beside the streets.
    """
    units: dict[str, set[str]] = {}
    for code5, text in members.items():
        for line in text.splitlines():
            name, *_, reading = line.split("\t")
            units.setdefault(base_of(name)[0], set()).add(code5)
            if romanisable(reading):  # and by its romaji key, for one typed in romaji alone
                units.setdefault(romaji_key(romanise(reading)), set()).add(code5)
    index: dict[str, list[str]] = {}
    for base in sorted(units):
        index.setdefault(_town_member(base), []).append(f"{base}\t{' '.join(sorted(units[base]))}")
    return {name: "\n".join(lines) + "\n" for name, lines in index.items()}


TOWN_MEMBERS = 64  # the index's members, by first character: few, so the archive opens fast


def _town_member(base: str) -> str:
    return f"towns/{ord(base[:1] or ' ') % TOWN_MEMBERS:02d}.tsv"


def units_with_romaji(text: str) -> list[str]:
    """Return the municipalities having a 町丁目 whose reading is what romaji text names
    ("Sangenjaya 2-chome": its numbers and "chome" aside), [] when none has."""
    key = _romaji_words(text)[1]
    if len(key) < 2:  # punctuation, or a letter: no name
        return []
    return next((codes for base, codes in _towns(key) if base == key), [])


def _towns(key: str) -> Iterator[tuple[str, list[str]]]:
    """Yield the town index's names (keys) and the units having each, from key's member."""
    try:
        lines = _read(_town_member(key)).decode("utf-8").splitlines()
    except KeyError:
        return
    for line in lines:
        base, codes = line.split("\t")
        yield base, codes.split()


def units_with_town(text: str) -> list[str]:
    """Return the municipalities having the 町丁目 (of two characters or more) that text
    starts with, the longest name that any has; [] when no such name starts it."""
    key = re.sub(r"^大?字", "", town_key(unicodedata.normalize("NFKC", text).strip()))
    # What follows the name must be its 丁目 or 番地 (or nothing): 名古屋駅 is no street of
    # a 名古屋 町丁目, nor 博多駅 of 博多.
    fits = [
        (base, codes)
        for base, codes in _towns(key)
        if len(base) >= 2 and key.startswith(base) and re.match(r"(-?[0-9]|$)", key[len(base) :])
    ]
    return max(fits, key=lambda fit: len(fit[0]))[1] if fits else []


@functools.lru_cache(maxsize=STREETS_KEPT)
def _by_first(code5: str) -> dict[str, list[_Entry]]:
    index: dict[str, list[_Entry]] = {}
    for entry in streets(code5):
        index.setdefault(entry.base[:1], []).append(entry)
    return index


def find(codes: list[str], text: str, kyoto: bool = False) -> Found:
    """Find the 町丁目 that text (what follows the municipality's name) starts with.

    Found.streets is empty when none matches, several when the text fits several equally
    (a 町丁目 without its 丁目, a name a municipality has twice).
    """
    typed = unicodedata.normalize("NFKC", text).strip(" 　,、")
    key = re.sub(r"^大?字", "", town_key(typed))
    # A name starts the text: only names of the same first character need a look. Kyoto's
    # names may follow its streets' (寺町通御池上る上本能寺前町): if none starts it, any.
    best = [
        (length, entry.street)
        for code5 in codes
        for entry in _by_first(code5).get(key[:1], ())
        if (length := _match(entry, key)) is not None
    ]
    if not best:  # a 町 left off (元城 for 元城町), where no other name takes the text
        best = [
            (len(entry.base) - 1, entry.street)
            for code5 in codes
            for entry in _by_first(code5).get(key[:1], ())
            if entry.chome is None
            and entry.base.endswith("町")
            and len(entry.base) > 2
            and key.startswith(entry.base[:-1])
            and not ((after := key[len(entry.base) - 1 :]) and _continues(entry.base[:-1], after))
        ]
    if not best and kyoto:
        for entry in (entry for code5 in codes for entry in streets(code5)):
            if entry.base and (start := key.find(entry.base)) > 0:
                if (length := _match(entry, key[start:])) is not None:
                    best.append((start + length, entry.street))
    if best:
        top = max(length for length, _ in best)
        picked = tuple(dict.fromkeys(street for length, street in best if length == top))
        if len(picked) == 1:
            return Found(picked, _rest(typed, top))
    # The name exactly as the data writes it settles a tie between names read alike (大字黒石
    # and 黒石, 蓮ケ谷町 and 蓮ヶ谷町: both in the data) and finds the names the reading
    # cannot take (四丁目 alone, （大字なし）): every choice offered resolves back to itself.
    candidates = picked if best else [e.street for code5 in codes for e in streets(code5)]
    names = {
        street: unicodedata.normalize("NFKC", street.name).strip("()") for street in candidates
    }
    exact = [street for street, name in names.items() if typed.startswith(name)]
    if exact:
        longest = max(len(names[street]) for street in exact)
        exact = [street for street in exact if len(names[street]) == longest]
        if len(exact) == 1:
            return Found((exact[0],), typed[longest:].strip(" 　,、-"))
    return Found(picked[:MAX_CANDIDATES] if best else ())


def _match(entry: _Entry, key: str) -> int | None:
    """Return how much of key the entry's name takes (a 丁目 without its number: -1)."""
    if not key.startswith(entry.base) or not entry.base:
        return None
    after = key[len(entry.base) :]
    if entry.chome is None:
        # A longer name that merely starts the same (丸の内 in 丸の内北) is another town.
        return len(entry.base) if not after or not _continues(entry.base, after) else None
    number = _AFTER_CHOME.match(after)
    if number and int(number[1]) == entry.chome:
        return len(entry.base) + len(number[1]) + len(number[2])
    if not after or not after[0].isdigit():
        return len(entry.base) - 1  # 丸の内 alone: each of its 丁目 is a candidate
    return None


def _continues(base: str, after: str) -> bool:
    # A name ends at a digit, a hyphen or a 番地 mark; a kanji or kana goes on being a name.
    return not re.match(r"[0-9-]|番|字|大字", after)


def _rest(typed: str, consumed_key_length: int) -> str:
    """Return what was typed after the part whose key is consumed_key_length long."""
    end = bisect.bisect_left(
        range(len(typed) + 1),
        consumed_key_length,
        key=lambda i: len(re.sub(r"^大?字", "", town_key(typed[:i]))),
    )
    return typed[end:].strip(" 　,、-")


def nearest(code5: str, lat: float, lon: float) -> Street | None:
    """Return the 町丁目 whose point is nearest, if the point is within its circle."""
    k = math.cos(math.radians(lat))
    distances = (
        (math.hypot(e.street.lat - lat, (e.street.lon - lon) * k), e.street) for e in streets(code5)
    )
    best = min(distances, default=None, key=lambda pair: pair[0])
    if best is None or best[0] * METRES_PER_DEGREE_LAT > best[1].radius_m:
        return None
    return best[1]


def suggest(codes: list[str], text: str, limit: int = 5) -> list[Street]:
    """Return the streets whose names are closest to text's leading name."""
    key = re.sub(r"^大?字", "", town_key(unicodedata.normalize("NFKC", text)))
    name = re.match(r"[^0-9-]*", key)[0] or key  # type: ignore[index]
    entries = [entry for code5 in codes for entry in streets(code5)]
    by_base: dict[str, list[Street]] = {}
    for entry in entries:
        by_base.setdefault(entry.base, []).append(entry.street)
    found: dict[Street, None] = {}
    for base in difflib.get_close_matches(name, list(by_base), n=limit, cutoff=0.5):
        found.update(dict.fromkeys(by_base[base][:limit]))
    return list(found)[:limit]
