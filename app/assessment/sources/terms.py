"""The landslide zone data's conditions per prefecture, and which layers they rule out.

The sediment-disaster warning zones are designated and published by each prefecture; the
conditions under which each allows their reuse are MLIT's 国土数値情報 A33 permission list
(A33_permision_R7.xlsx). data/landslide_terms.csv holds what this app knows of it, with
the source of each row and whether it is confirmed. Reports are sold, so a prefecture
whose conditions forbid commercial secondary use gets the landslide layer omitted, with
the reason; a prefecture whose conditions are unconfirmed keeps the layer, and the report
says the conditions were not confirmed.
"""

import csv
import io
from functools import lru_cache
from importlib import resources
from typing import Any

OMITTED_LAYER = "landslide"


@lru_cache(maxsize=1)
def table() -> dict[str, dict[str, str]]:
    """Return the conditions by two-digit prefecture code."""
    text = resources.files(__package__).joinpath("data", "landslide_terms.csv").read_text("utf-8")
    return {row["pref_code"]: row for row in csv.DictReader(io.StringIO(text))}


def conditions(area: Any) -> dict[str, str]:
    """Return the landslide data's conditions for the area's prefecture."""
    return table().get(str(area.code)[:2], {})


def omitted(layer: str, area: Any) -> str:
    """Return why a layer is not read for an area ("" when it is read)."""
    if layer != OMITTED_LAYER:
        return ""
    row = conditions(area)
    if row.get("commercial_use") == "forbidden":
        return f"{row['prefecture']}: {row['conditions_en']}. Source: {row['source']}."
    return ""
