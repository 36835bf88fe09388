"""The landslide zone data's conditions per prefecture, and which layers they rule out.

The sediment-disaster warning zones are designated and published by each prefecture; the
conditions under which each allows their reuse are in MLIT's 国土数値情報 A33 (令和7年度)
conditions workbook (A33_permision_R7.xlsx), which the portal's catalogue entry for each
landslide dataset makes part of using its tiles. data/landslide_terms.csv holds it per
prefecture with its source (data/README.md). Reports are sold, so a prefecture whose
conditions forbid commercial secondary use gets the landslide layer omitted, with the
reason; a prefecture with conditions keeps the layer, and the report prints the
conditions and the statement the prefecture requires.
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


def omitted_ja(area: Any) -> str:
    """Return, in Japanese, why the landslide layer is not read for an area."""
    row = conditions(area)
    return f"{row.get('prefecture', '')}：{row.get('conditions_ja', '')}"
