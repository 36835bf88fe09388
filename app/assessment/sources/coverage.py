"""Which zone layers have open data for a place, and which the data's terms let us read.

data/coverage.csv records, per layer and prefecture, what the portal's open-data catalogue
(https://disaportal.gsi.go.jp/hazardmap/copyright/opendata.html) and its tsunami
publication list deliver, with the source and the date it was read: "no" (no open
delivery for that prefecture: the layer is "not_published", with the reason), "islands"
(only the units from a code on: Tokyo's tsunami data cover its islands alone) or "partly"
(read, with a note the report prints). terms.py says where the landslide data's terms
forbid the use (the layer is "omitted").
"""

import csv
import io
from functools import lru_cache
from importlib import resources
from typing import Any

from . import terms


@lru_cache(maxsize=1)
def table() -> list[dict[str, str]]:
    """Return the coverage rows."""
    text = resources.files(__package__).joinpath("data", "coverage.csv").read_text("utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def rows_for(layer: str, area: Any) -> list[dict[str, str]]:
    """Return the rows about a layer in the area's prefecture (and those for every one)."""
    pref = str(area.code)[:2]
    return [r for r in table() if r["layer"] == layer and r["pref_code"] in (pref, "*")]


def unread(layer: str, area: Any) -> tuple[str, str, str]:
    """Return ("not_published" or "omitted", why in English, in Japanese) for a layer not
    read here, else ("", "", "").
    """
    if reason := terms.omitted(layer, area):
        return "omitted", reason, terms.omitted_ja(area)
    code5 = str(area.code)[:5]
    for row in rows_for(layer, area):
        if row["published"] == "no" or (row["published"] == "islands" and code5 < row["scope"]):
            # Its source and date go to the report's sources (sources_for), not inline.
            return "not_published", row["reason_en"], row["reason_ja"]
    return "", "", ""


def sources_for(area: Any) -> list[dict[str, str]]:
    """Return the coverage table's sources of what a report says about coverage here:
    [{"layers", "source", "date"}] for each source a not-published or partly-published
    layer of the area's prefecture was read from."""
    found: dict[tuple[str, str], list[str]] = {}
    for row in table():
        if row["pref_code"] in (str(area.code)[:2], "*") and row["published"] != "yes":
            found.setdefault((row["source"], row["retrieved"]), []).append(row["layer"])
    return [
        {"layers": ",".join(dict.fromkeys(layers)), "source": source, "date": date}
        for (source, date), layers in found.items()
    ]


def notes(layer: str, area: Any) -> list[dict[str, str]]:
    """Return what the report says about a layer's partial coverage here, in both languages.

    For the landslide layer, also the part of the extent in a touched prefecture whose
    terms forbid the use: its tiles are not read (terms.readable_keys).
    """
    said = [
        {"en": r["reason_en"], "ja": r["reason_ja"], "source": r["source"], "date": r["retrieved"]}
        for r in rows_for(layer, area)
        if r["published"] == "partly"
    ]
    if layer == terms.OMITTED_LAYER:
        from ..grid.zones import plan
        from ..registers.outlines import prefecture_shares

        planned = plan(area)
        if any(terms.forbidden(pref) for pref in planned.prefectures[1:]):
            shares = prefecture_shares(planned.outline.geometry)
            said += terms.part_omitted(planned.prefectures, shares)
    return said
