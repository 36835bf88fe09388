"""The landslide zone data's conditions per prefecture, and which layers they rule out.

The sediment-disaster warning zones are designated and published by each prefecture; the
conditions under which each allows their reuse are in MLIT's 国土数値情報 A33 (令和7年度)
conditions workbook (A33_permision_R7.xlsx), which the portal's catalogue entry for each
landslide dataset makes part of using its tiles. data/landslide_terms.csv holds it per
prefecture with its source (data/README.md). Reports are sold, so a prefecture whose
conditions forbid commercial secondary use gets the landslide layer omitted, with the
reason; a prefecture with conditions keeps the layer, and the report prints the
conditions and the statement the prefecture requires.

An extent near a prefecture's border reads the tiles of every prefecture it touches: the
terms of each decide for its own tiles. A touched prefecture whose terms forbid the use is
not read (readable_keys), the report names the part left out (part_omitted), and the
conditions and statements of every prefecture touched are printed (conditions_of).
"""

import csv
import io
from functools import lru_cache
from importlib import resources
from typing import Any

OMITTED_LAYER = "landslide"
# The datasets these terms rule: other datasets read per prefecture (inland flooding) are
# published under the portal's own terms, whatever a prefecture allows of its landslide data.
RULED_DATASETS = frozenset({"debris_flow_zones", "steep_slope_zones", "landslide_zones"})


@lru_cache(maxsize=1)
def table() -> dict[str, dict[str, str]]:
    """Return the conditions by two-digit prefecture code."""
    text = resources.files(__package__).joinpath("data", "landslide_terms.csv").read_text("utf-8")
    return {row["pref_code"]: row for row in csv.DictReader(io.StringIO(text))}


def conditions(area: Any) -> dict[str, str]:
    """Return the landslide data's conditions for the area's prefecture."""
    return table().get(str(area.code)[:2], {})


def forbidden(pref: str) -> bool:
    """Tell whether a prefecture's landslide data may not be used in a sold report."""
    return table().get(pref, {}).get("commercial_use") == "forbidden"


def readable_keys(dataset: str, keys: list[str]) -> list[str]:
    """Return a dataset's keys whose prefecture's terms let a sold report read them.

    Landslide keys start with their prefecture ("26/17/x/y") and are kept where its terms
    allow; every other dataset's keys are kept, per-prefecture ones (inland flooding) too.
    """
    if dataset not in RULED_DATASETS:
        return list(keys)
    return [key for key in keys if not (key.count("/") == 3 and forbidden(key.split("/")[0]))]


def conditions_of(pref: str) -> dict[str, str]:
    """Return the landslide data's conditions for a prefecture by its two-digit code."""
    return table().get(pref, {})


def part_omitted(
    prefectures: list[str] | tuple[str, ...], shares: dict[str, float]
) -> list[dict[str, str]]:
    """Return a note per touched prefecture (not the first, the place's own) left unread.

    shares: the part of the extent in each prefecture (0 to 1), as the note says it.
    """
    notes = []
    for pref in prefectures[1:]:
        if forbidden(pref):
            row, share = table()[pref], max(1, round(100 * shares.get(pref, 0.0)))
            notes.append(
                {
                    "en": (
                        f"The part of the extent in {row['prefecture']} (about {share} %) is"
                        f" not read: its landslide data's terms forbid this use"
                        f" ({row['conditions_en']}). Zones there are not shown, and that part"
                        " counts as no zone mapped in the shares: it is unknown, not safe."
                    ),
                    "ja": (
                        f"範囲のうち{row['prefecture']}の部分（約{share}%）は読み取っていません"
                        f"（土砂災害警戒区域のデータの利用条件：{row['conditions_ja']}）。"
                        "その部分の区域は表示されず、割合では区域なしに数えています"
                        "（安全という意味ではなく、不明です）。"
                    ),
                    "source": row["source"],
                    "date": "",
                    "prefecture": pref,
                }
            )
    return notes


def omitted(layer: str, area: Any) -> str:
    """Return why a layer is not read for an area ("" when it is read)."""
    if layer != OMITTED_LAYER:
        return ""
    row = conditions(area)
    if row.get("commercial_use") == "forbidden":
        # Its source is printed with the terms under the report's sources, not inline.
        return f"{row['prefecture']}: {row['conditions_en']}."
    return ""


def omitted_ja(area: Any) -> str:
    """Return, in Japanese, why the landslide layer is not read for an area."""
    row = conditions(area)
    return f"{row.get('prefecture', '')}：{row.get('conditions_ja', '')}"
