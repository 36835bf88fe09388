"""Local-government units abolished since japancode's data, and what each became.

The rows live in data/municipal_changes.csv (source: the Ministry of Internal Affairs and
Communications' list of code changes; see data/README.md), so a change is a data edit.
"""

import csv
import io
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Change:
    """One unit that ceased to exist, and the current units its territory went to."""

    old_code: str  # 6 digits with the check digit
    old_name: str  # with its prefecture: 静岡県浜松市中区
    new_codes: tuple[str, ...]
    new_names: tuple[str, ...]
    date: str  # ISO 8601
    source: str


def load() -> dict[str, Change]:
    """Return the changes by the old unit's 5-digit code."""
    text = resources.files(__package__).joinpath("data", "municipal_changes.csv").read_text("utf-8")
    rows: dict[str, list[dict[str, str]]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        rows.setdefault(row["old_code"][:5], []).append(row)
    return {
        code5: Change(
            old_code=group[0]["old_code"],
            old_name=group[0]["old_name"],
            new_codes=tuple(row["new_code"] for row in group),
            new_names=tuple(row["new_name"] for row in group),
            date=group[0]["date"],
            source=group[0]["source"],
        )
        for code5, group in rows.items()
    }
