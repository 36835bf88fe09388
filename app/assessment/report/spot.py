"""What lies at a point report's spot itself, apart from the circle around it.

A zone layer says the class of the pixel under the spot (read at the deepest zoom the
portal has, grid/locate.py) and, for each class present in the circle, how far and in
which direction its nearest pixel lies; a mesh layer (liquefaction, seismic) names the
250 m mesh the spot is in and its class. The figures are language-free (class keys,
metres, bearings, compass points); the template words them.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from ..grid.legends import ZoneClass
from ..grid.locate import Nearest, compass
from ..grid.tiles import NO_ZONE, UNRECOGNISED
from .readings import SHAKING_BANDS

SPOT_ZOOM = 17  # the portal's deepest zoom (docs/providers.md)
NAMES = {
    NO_ZONE: ("No zone mapped", "区域の指定なし"),
    UNRECOGNISED: ("A colour not in the legend", "凡例にない色"),
    "not_mapped": ("No data", "データなし"),
}


def rounded(metres: float) -> int:
    """Round a distance as a reader wants it: tens of metres, hundreds past a kilometre."""
    if metres >= 1000:
        return int(round(metres / 100) * 100)
    return max(10, int(round(metres / 10) * 10))


def _label(
    key: str, legend: Sequence[Mapping[str, Any]], zone: ZoneClass | None = None
) -> dict[str, str]:
    """Return a class's key and words: the legend's, else the class's own, else NAMES."""
    from .analysis import class_names

    row = next((c for c in legend if c["key"] == key), None)
    if row:
        en, ja = row["en"], row["ja"]
    elif zone is not None:  # a class the legend does not show: a planned zone's border
        en, ja = class_names(zone)
    else:
        en, ja = NAMES.get(key, (key, key))
    return {"key": key, "en": en, "ja": ja}


def zone_spot(
    read: Sequence[tuple[tuple[ZoneClass, ...], int, Nearest]],
    legend: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Return a zone layer's at_point and nearest from each dataset's (legend, class, nearest).

    The class at the spot is the worst of the layer's datasets there (unrecognised only
    when none has a class); nearest holds every class present in the circle, the spot's
    own at 0 m.
    """
    worst: ZoneClass | None = None
    other = False
    nearest: dict[str, dict[str, Any]] = {}
    for classes, index, near in read:
        if index > 0 and (worst is None or classes[index - 1].rank > worst.rank):
            worst = classes[index - 1]
        other = other or index < 0
        for i, (metres, bearing) in sorted(near.items()):
            here = i == index
            nearest[classes[i - 1].key] = {
                "metres": 0 if here else rounded(metres),
                "bearing": None if here else round(bearing),
                "direction": "" if here else compass(bearing),
            }
    key = worst.key if worst else (UNRECOGNISED if other else NO_ZONE)
    order = [c["key"] for c in legend]
    ranked = sorted(nearest, key=lambda k: order.index(k) if k in order else len(order))
    at_point = _label(key, legend, worst)
    return {"at_point": at_point, "nearest": {k: nearest[k] for k in ranked}}


def no_data(legend: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Return the at_point of a layer that was not read for the place: no data there."""
    return _label("not_mapped", legend)


def mesh_spot(key: str, mesh: str, legend: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Return a mesh layer's at_point: the spot's 250 m mesh and its class."""
    return {"at_point": {**_label(key, legend), "mesh": mesh}}


def liquefaction_key(answer: Mapping[str, Any] | None) -> str:
    """Return the liquefaction tendency of a mesh's answer (None: no data there)."""
    from ..sources.jshis import LIQUEFACTION_TENDENCY

    if answer is None:
        return "not_mapped"
    return LIQUEFACTION_TENDENCY.get(int(answer["jcode"]), "not_mapped")


def shaking_key(answer: Mapping[str, Any] | None) -> str:
    """Return the shaking band of a mesh's answer (None: no data there)."""
    if answer is None:
        return "not_mapped"
    p = float(answer["shaking_prob_30y"])
    return next(band[0] for band in SHAKING_BANDS if p < band[1])
