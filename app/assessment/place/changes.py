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


def disagreements(
    japancode: dict[str, str], today: dict[str, str], changes: dict[str, Change]
) -> list[str]:
    """List what japancode's and Japan Post's codes (code5 -> name) disagree on, unexplained.

    A designated city (浜松市) has no postal codes of its own, only its wards do: that is
    not a disagreement. Everything else must be explained by a change.
    """
    cities = {name.split(" ")[0] + code5[:2] for code5, name in japancode.items() if " " in name}
    new_codes = {code[:5]: change for change in changes.values() for code in change.new_codes}
    found = []
    for code5 in sorted(japancode.keys() - today.keys()):
        if code5 not in changes and japancode[code5] + code5[:2] not in cities:
            found.append(
                f"{code5} {japancode[code5]}: in japancode, not in Japan Post's data. "
                "If it was abolished, add what it became to data/municipal_changes.csv."
            )
    for code5 in sorted(today.keys() - japancode.keys()):
        if code5 not in new_codes:
            found.append(
                f"{code5} {today[code5]}: new in Japan Post's data. Add the change that "
                "created it to data/municipal_changes.csv (its coordinates are borrowed)."
            )
    for code5, change in sorted(changes.items()):
        if code5 in today:
            found.append(
                f"{code5} {change.old_name}: listed as abolished, yet it has postal codes."
            )
        for code in change.new_codes:
            if code[:5] not in today:
                found.append(f"{code} (successor of {code5}): not in Japan Post's data.")
    return found
