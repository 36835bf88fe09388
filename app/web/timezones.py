"""The time-zone choice: Japan's and the common zones first, then every place, in words.

Raw zone names ("Africa/Abidjan") are codes; a reader picks "日本時間" or "Japan Time",
with its UTC offset, and the zones are ordered by offset so a neighbour is easy to find.
"""

import functools
import re
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

from babel import Locale
from babel.dates import get_timezone_location

from .i18n import TIMEZONES

COMMON = (
    "Asia/Tokyo",
    "UTC",
    "Asia/Seoul",
    "Asia/Shanghai",
    "Asia/Taipei",
    "Asia/Singapore",
    "Asia/Bangkok",
    "Asia/Kolkata",
    "Australia/Sydney",
    "Europe/London",
    "Europe/Paris",
    "Europe/Berlin",
    "America/New_York",
    "America/Chicago",
    "America/Los_Angeles",
    "Pacific/Honolulu",
)
REGION = re.compile(r"(Africa|America|Antarctica|Asia|Atlantic|Australia|Europe|Indian|Pacific)/")
UTC_NAMES = {"en": "Coordinated Universal Time", "ja": "協定世界時"}


def minutes_of(zone: str, on: date) -> int:
    """Return a zone's UTC offset in minutes at noon UTC on a day."""
    here = datetime(on.year, on.month, on.day, 12, tzinfo=UTC).astimezone(ZoneInfo(zone))
    return int(here.utcoffset().total_seconds() // 60)


def label(zone: str, lang: str, on: date) -> str:
    """Name a zone in lang with its offset: "(UTC+09:00) 日本時間"."""
    name = UTC_NAMES[lang] if zone == "UTC" else get_timezone_location(zone, locale=Locale(lang))
    minutes = minutes_of(zone, on)
    sign = "+" if minutes >= 0 else "-"
    return f"(UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}) {name}"


GROUPS = {"ja": ("よく使われるタイムゾーン", "すべての地域（時差の順）"),
          "en": ("Common", "Every place, by offset")}  # fmt: skip


@functools.lru_cache(maxsize=8)
def choices(lang: str, on: date) -> dict[str, list[tuple[str, str]]]:
    """Return the grouped choices for a select: the common zones, then every place's."""
    common = [(zone, label(zone, lang, on)) for zone in COMMON]
    places = []
    for zone in TIMEZONES:  # the zones a saved choice may name (i18n.py)
        if REGION.match(zone) and zone not in COMMON:
            try:
                places.append((minutes_of(zone, on), label(zone, lang, on), zone))
            except LookupError:  # a zone Babel's data does not know: not offered
                continue
    places = one_per_name(places, {text for _, text in common})
    first, every = GROUPS[lang]
    return {first: common, every: [(zone, text) for _, text, zone in places]}


def one_per_name(places: list[tuple[int, str, str]], taken: set[str]) -> list[tuple[int, str, str]]:
    """Keep one zone per label, by offset: the others are IANA's old names for the same time.

    Babel names a zone's links alike (America/Ensenada and America/Santa_Isabel are
    Tijuana's, Pacific/Samoa is Pago Pago's), so the list said "メキシコ（ティフアナ）時間"
    three times. The zone kept is the one named after the city the label gives; a label
    the common zones already hold is not repeated. A saved old name stays choosable
    (auth.preferences_form adds it).
    """
    kept: dict[str, tuple[int, str, str]] = {}
    for minutes, text, zone in sorted(places, key=lambda p: (not named_after_city(p[2]), p[2])):
        if text not in taken and text not in kept:
            kept[text] = (minutes, text, zone)
    return sorted(kept.values())


def named_after_city(zone: str) -> bool:
    """Say whether a zone's id ends with its CLDR city (Asia/Kolkata, not Asia/Calcutta)."""
    city = get_timezone_location(zone, locale=Locale("en"), return_city=True)
    return zone.rsplit("/", 1)[-1].replace("_", " ") == city
