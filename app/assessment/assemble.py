"""The report put together from what its layers read.

After run_assessment's fetches (work.py): the base map composed (compose), each zone
layer's rasters drawn on the map (draw_zones), what a layer says at a point report's spot
(at_the_spot), the map's pin, scale and credit (the_map), and where to evacuate from a
point (where_to_go).
"""

import threading
from collections.abc import Callable
from typing import Any

from . import fetchers
from .errors import ProviderError
from .grid import pixels
from .grid.sampling import mesh250
from .place.area import Area
from .report import maps, sites, spot
from .sources import basemap, evacuation
from .sources.providers import LayerProvider

Fetched = dict[str, list[dict[str, Any]]]  # a layer's answers, by dataset

COMPOSING = threading.Lock()  # base maps composed one at a time per process (~20 MiB each)


def compose(pngs: Any = None, box: Any = None, zoom: int = 0, **said: Any) -> dict[str, Any]:
    """Return the base map as one picture, once the layers are read (None: said why).

    After the layers, not beside them, and one job at a time: the picture's megabytes
    (about 15 MiB at its largest) then never add to the layers' decoding.
    """
    if pngs is None:
        return said
    try:  # in the pixel pool when there is one: the worker's GIL stays the pages'
        with COMPOSING:
            picture = pixels.call(maps.base_map, box, zoom, pngs)
    except (OSError, ValueError):  # a tile Pillow cannot read
        return {"base": None, "base_reason": "unavailable"}
    return {"base": picture, "base_reason": None, "base_zoom": zoom, "base_tiles": len(pngs)}


def draw_zones(
    row: dict[str, Any], rasters: dict[str, maps.ZoneRaster], bounds: Any
) -> dict[str, Any]:
    """Return a zone layer's rasters as drawn on the map (in place of the coarse cells)."""
    drawn = {}
    for dataset in row.get("maps", {}):
        if dataset in rasters and (picture := rasters[dataset].drawn()) is not None:
            drawn[dataset] = {**picture, "rect": maps.image_rect(bounds, picture["bounds"])}
    if not any(ds in rasters for ds in row.get("maps", {})):
        return {}
    return {"rasters": drawn, "maps": {ds: [] for ds in row["maps"]}}


def at_the_spot(
    row: dict[str, Any],
    fetched: Fetched,
    spots: dict[str, Any],
    here: tuple[float, float] | None,
    fetch: Callable[[str, str], dict[str, Any] | None],
) -> dict[str, Any]:
    """Return what a layer says at a point report's spot (nothing for a place's report)."""
    if here is None:
        return {}
    legend = row.get("legend", [])
    if not fetched:  # not published for the place (or not to be read): no data at the spot
        return {"at_point": spot.no_data(legend)}
    if all(ds in spots for ds in fetched):
        return spot.zone_spot([spots[ds] for ds in fetched], legend)
    mesh = mesh250(*here)
    (dataset,) = fetched
    answer = fetch(dataset, mesh)  # the spot's own mesh: asked already, so from the cache
    key = spot.liquefaction_key(answer) if dataset == "ground" else spot.shaking_key(answer)
    return spot.mesh_spot(key, mesh, legend)


def the_map(bounds: Any, base: dict[str, Any], here: tuple[float, float] | None) -> dict:
    """Return what the report's map draws besides the zones: base map, pin, scale, credit."""
    return {
        **base,
        "credit": basemap.CREDIT if base.get("base") else None,
        "spot": maps.spot_xy(bounds, *here) if here else None,
        "scale": maps.scale_bar(bounds),
    }


def where_to_go(
    provider: LayerProvider,
    area: Area,
    here: tuple[float, float] | None,
    layers: list[dict[str, Any]],
    fetch_sites: Callable[[int, str], dict[str, Any]],
    place: Callable[[float, float], tuple[list[float], bool]],
    down: bool = False,
) -> dict[str, Any] | None:
    """Return a point report's evacuation sites per hazard present (None: none are read).

    The zoom-10 tiles of each hazard type present, within the circle and a margin, a few at
    once; a site tile shared by neighbouring reports comes from the cache. Sites that cannot
    be read leave the zones standing: the report says the sites could not be read, at once
    when they could not be read beside the layers (down).
    """
    source = getattr(provider, "evacuation", None)
    if here is None or source is None:
        return None
    found = sites.present(layers)
    reach = sites.reach_m(area.radius_m)
    keys = evacuation.tile_keys(*here, reach)
    asks = [(code, key) for code in found for key in keys]
    answers: dict[int, list[dict[str, Any]]] | None = None
    try:
        if not down:
            with fetchers.pool().queue() as queue:  # fetch_sites says if the job stopped
                read = queue.map(lambda ask: fetch_sites(*ask), asks)
            answers = {code: [a for (c, _), a in zip(asks, read, strict=True) if c == code]
                       for code in found}  # fmt: skip
    except ProviderError:
        pass  # said in the report: the sites could not be read
    read = [a for per in (answers or {}).values() for a in per]
    return {**sites.section(found, answers, here, reach, place), "source": source.source(read)}
