"""A hazard layer's state: what its row says it found, whatever the language.

A stored report keeps each layer's state ("zones", "no_zone", ...); the report's words for
each (analysis.STATE_LABELS), the narrative, the sites and what to do all read it, and
reports stored before states were kept have theirs worked out from their fields
(state_of).
"""

from collections.abc import Mapping
from typing import Any

# A layer's state: zones found, none found, no open data for the prefecture, not read
# (the data's terms), a mesh layer read (liquefaction, shaking), or a mesh layer whose
# meshes hold no land with a class (water, unclassified or no answer): no level then.
ZONES, NO_ZONE, NOT_PUBLISHED = "zones", "no_zone", "not_published"
OMITTED, READ, NO_DATA = "omitted", "read", "no_data"
# A zone layer whose tiles hold colours of no legend class that are not anti-aliased edges
# (tiles.stray_colours), readings.NOISE_PIXELS or more, and no known class: they could be any class,
# the worst too, so the layer has no level (never a lower one) and the report says why.
# With a known class as well, that class's level stands as the least it can be (a known
# special warning zone never leaves the headline for a few stray pixels) and the report
# says it could be worse.
UNCERTAIN = "uncertain"
# A zone layer whose classes set no level (flood duration: how long the water stays; the
# planned scale: a smaller, more frequent flood than the planned maximum weighed as flood):
# a detail of flood, its zones shown, with the worst class found, and not weighed.
SHOWN = "shown"
# The layers that read designated zones, and those shown beside flood, never weighed.
ZONE_LAYERS = ("flood", "tsunami", "storm_surge", "inland_flood", "house_collapse", "landslide")
DETAIL_LAYERS = ("flood_planned", "flood_duration")


def state_of(row: Mapping[str, Any]) -> str:
    """Return a stored layer row's state (reports stored before states: from its fields)."""
    if row.get("state"):
        return str(row["state"])
    if row.get("omitted"):
        return OMITTED
    if row["key"] in DETAIL_LAYERS:
        return SHOWN if row.get("worst") else NO_ZONE
    if row["key"] not in ZONE_LAYERS:
        return READ
    # Before states, a zone layer with no zone found was stored at level 1 with no worst
    # class: that is "no zone", never "very low". (A row without "worst" at all is not
    # such a stored row: its index alone says its level.)
    return NO_ZONE if "worst" in row and row["worst"] is None else ZONES
