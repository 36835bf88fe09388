"""How each layer's answers become its row: shares per class, the worst, the level.

The zone layers read the portal's pixel counts per legend class (read_zones); liquefaction
the landform class of each 250 m mesh (read_liquefaction); shaking J-SHIS's 30-year
probability per mesh (read_seismic). A row holds figures only: analysis.describe words it.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from .states import NO_DATA, NO_ZONE, READ, SHOWN, UNCERTAIN, ZONES

# The level rules, documented in the report and in docs/providers.md. A zone layer's level
# is the level of the worst class present (ZoneClass.level: depth under 0.5 m 2, 0.5-3 m 3,
# 3-5 m 4, 5 m or more 5; landslide warning 3, special warning 5, planned one below). A
# class is present when at least NOISE_PIXELS of its pixels lie inside the area: a floor
# against stray pixels, not a share, so 10 km2 of deep water in a large city still counts.
# The shares say how much. No class present: state "no_zone", and no level at all.
NOISE_PIXELS = 4
# J-SHIS's legend bands of the 30-year probability of JMA intensity 6-lower or more.
SHAKING_BANDS = (
    ("lt0.1", 0.001, "under 0.1 %", "0.1%未満"),
    ("0.1-3", 0.03, "0.1 to 3 %", "0.1〜3%"),
    ("3-6", 0.06, "3 to 6 %", "3〜6%"),
    ("6-26", 0.26, "6 to 26 %", "6〜26%"),
    ("ge26", 2.0, "26 % or more", "26%以上"),
)
TENDENCIES = (
    ("very_low", "very low", "非常に低い"),
    ("low", "low", "低い"),
    ("moderate", "moderate", "やや高い"),
    ("high", "high", "高い"),
    ("water", "water", "水域"),
)
NOT_MAPPED = "not_mapped"


def index_of(level: int) -> float:
    """Return the index (0 to 1) that stands for a level: the middle of its fifth."""
    return round((level - 1) / 5 + 0.1, 3)


def _zone_row(answer: Mapping[str, Any], legend: Sequence[Any]) -> dict[str, Any]:
    counts = answer["counts"]
    total = sum(counts.values()) or 1
    shares = {key: round(count / total, 6) for key, count in counts.items()}
    present = [z for z in legend if not z.border and counts.get(z.key, 0) >= NOISE_PIXELS]
    stray = dict(answer.get("stray") or {})
    # Tiles off an unconfirmed legend (answer["unreadable"]): every colour off it counts,
    # however few, as the layer could not be read by that legend at all.
    if sum(stray.values()) < NOISE_PIXELS and not answer.get("unreadable"):
        stray = {}
    unreadable = answer.get("unreadable")
    return {"shares": shares, "present": present, "total": total, "stray": stray,
            **({"unreadable": unreadable} if unreadable else {})}  # fmt: skip


def _zones_result(
    rows: Sequence[tuple[str, Mapping[str, Any], dict[str, Any]]],
) -> dict[str, Any]:
    """Return a zone layer's reading from its datasets' rows: the worst class decides."""
    shares: dict[str, float] = {}
    present = []
    for _, _, row in rows:
        shares.update(row["shares"])
        present += row["present"]
    if len(rows) > 1:  # several datasets: "no zone" is the part no dataset paints
        painted = sum(1 - row["shares"].get("none", 1.0) for _, _, row in rows)
        shares["none"] = round(max(0.0, 1 - painted), 6)
        shares["other"] = round(sum(row["shares"].get("other", 0.0) for _, _, row in rows), 6)
    worst = max(present, key=lambda zone: (zone.level, zone.rank), default=None)
    level = (worst.level or None) if worst else None
    stray = {dataset: row["stray"] for dataset, _, row in rows if row.get("stray")}
    off = {dataset: row["unreadable"] for dataset, _, row in rows if row.get("unreadable")}
    state = (ZONES if level else SHOWN) if worst else UNCERTAIN if stray else NO_ZONE
    return {
        "state": state,
        "index": index_of(level) if level else None,
        **({"stray": stray} if stray else {}),
        **({"unreadable": off} if off else {}),
        "numbers": {"worst_class_share": shares[worst.key]} if worst else {},
        "shares": shares,
        "worst": worst.key if worst else None,
        "mapped": True,
        "maps": {dataset: [] for dataset, _, _ in rows},  # drawn as rasters (assemble.draw_zones)
    }


def read_zones(fetched: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    from ..grid.legends import LEGENDS
    from ..sources.portal import ZONE_DATASETS

    rows = []
    for dataset, answers in fetched.items():
        legend = LEGENDS[ZONE_DATASETS[dataset]]
        rows.append((dataset, answers[0], _zone_row(answers[0], legend)))
    return _zones_result(rows)


def _mesh_shares(keys: Sequence[str], asked: int) -> dict[str, float]:
    total = asked or 1
    counts: dict[str, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return {key: round(count / total, 4) for key, count in counts.items()}


def read_liquefaction(fetched: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    from ..sources.jshis import LIQUEFACTION_TENDENCY

    answers = fetched["ground"]
    with_data = [a for a in answers if not a.get("no_data")]
    tendencies = [LIQUEFACTION_TENDENCY.get(int(a["jcode"]), NOT_MAPPED) for a in with_data]
    per_mesh = {a["key"]: t for a, t in zip(with_data, tendencies, strict=True) if "key" in a}
    tendencies += [NOT_MAPPED] * (len(answers) - len(with_data))
    shares = {key: 0.0 for key, _, _ in TENDENCIES} | _mesh_shares(tendencies, len(answers))
    land = 1 - shares.get("water", 0.0) - shares.get(NOT_MAPPED, 0.0) or 1
    high, moderate = shares["high"] / land, shares["moderate"] / land
    low = shares["low"] / land
    # The share that decides the level is the one shown beside it.
    if high >= 0.05:
        level, deciding = (5 if high >= 0.25 else 4), {"high_tendency_share": round(high, 4)}
    elif high + moderate >= 0.25:
        level, deciding = 3, {"moderate_or_high_share": round(high + moderate, 4)}
    else:
        level = 2 if high + moderate + low > 0 else 1
        deciding = {"low_or_more_share": round(high + moderate + low, 4)}
    order = ("very_low", "low", "moderate", "high")
    worst = max((t for t in tendencies if t in order), key=order.index, default=None)
    land = worst is not None  # no mesh of land with a tendency: no level, never "very low"
    return {
        "index": index_of(level) if land else None,
        "state": READ if land else NO_DATA,
        "numbers": deciding if land else {},
        "shares": shares,
        "worst": worst,
        "mapped": bool(with_data),
        "landforms": sorted({int(a["jcode"]) for a in with_data}),
        "mesh_classes": per_mesh,
    }


def read_seismic(fetched: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    answers = [a for a in fetched["faults"] if not a.get("no_data")]
    probabilities = [float(a["shaking_prob_30y"]) for a in answers]
    bands = [next(i for i, b in enumerate(SHAKING_BANDS) if p < b[1]) for p in probabilities]
    keys = [SHAKING_BANDS[i][0] for i in bands]
    per_mesh = {a["key"]: k for a, k in zip(answers, keys, strict=True) if "key" in a}
    shares = {band[0]: 0.0 for band in SHAKING_BANDS} | _mesh_shares(keys, len(fetched["faults"]))
    missing = len(fetched["faults"]) - len(answers)
    if missing:
        shares[NOT_MAPPED] = round(missing / len(fetched["faults"]), 4)
    worst = max(bands)  # the worst place decides, as J-SHIS's map would show it
    return {
        "state": READ,
        "index": index_of(worst + 1),
        "numbers": {"shaking_prob_30y": max(probabilities)},
        "shares": shares,
        "worst": SHAKING_BANDS[worst][0],
        "mapped": True,
        "mesh_classes": per_mesh,
    }
