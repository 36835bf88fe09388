"""The portal's legends: what each colour of a designated-zone dataset's tiles means.

One table per portal dataset (LEGENDS, by its path), each class with its key, colour, rank,
the report's level where it is the worst present, and the legend image (or record) its
colour was read from; docs/providers.md cites each. tiles.classify is where colours meet a
legend.
"""

from dataclasses import dataclass

# Where each legend colour was read: the portal's legend images (their interiors sampled;
# docs/providers.md cites each and the record of that sampling).
LEGEND_IMAGES = "https://disaportal.gsi.go.jp/hazardmap/copyright/img/"
DEPTH_SOURCE = LEGEND_IMAGES + "shinsui_legend3.png"
# Inland flooding has its own legend image, in the same colours (docs/providers.md).
INLAND_SOURCE = LEGEND_IMAGES + "naisui_legend.png"
# Flood depth at the planned scale (計画規模, "現在の凡例"): GSI's own layer configuration
# for the portal's map (gsi-cyberjapan/gsimaps, layers_txt/layers_kasaneruhazardmap.txt)
# gives this legend image for it, the same image it gives for the planned maximum.
PLANNED_SOURCE = "https://disaportal.gsi.go.jp/maps/image/legend/shinsui_legend3.png"
# House-collapse zones and flood duration: colours as public projects record them (a
# popup table of the portal's colours in a public gsimaps add-on, layer tables of map
# apps); no GSI legend image of theirs was found, so no image is named: their source says
# so (docs/providers.md). `providers-check` is the operator's check.
UNCONFIRMED_SOURCE = "unconfirmed: as public projects record it (docs/providers.md)"
COLLAPSE_SOURCE = DURATION_SOURCE = UNCONFIRMED_SOURCE


@dataclass(frozen=True)
class ZoneClass:
    """One class of a legend: its key, colour, rank (higher is worse) and the level it sets.

    level is the report's level, 1 to 5, where this class is the worst present (0: the
    class sets no level of its own, as a planned zone's border). planned: a zone whose
    designation is planned (指定予定), not yet designated.
    """

    key: str
    colour: str  # "#RRGGBB"
    rank: int
    label_en: str
    label_ja: str
    level: int = 0
    source: str = ""
    planned: bool = False
    border: bool = False  # drawn around a zone, not a zone: recognised, counted apart

    @property
    def rgb(self) -> tuple[int, int, int]:
        """Return the colour as (r, g, b)."""
        return tuple(int(self.colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


DEPTH_ROWS = (
    ("lt0.3", "#FFFFB3", 2, "under 0.3 m", "0.3m未満"),
    ("0.3-0.5", "#F7F5A9", 2, "0.3 to 0.5 m", "0.3m以上0.5m未満"),
    ("0.5-1", "#F8E1A6", 3, "0.5 to 1 m", "0.5m以上1m未満"),
    ("1-3", "#FFD8C0", 3, "1 to 3 m", "1m以上3m未満"),
    ("3-5", "#FFB7B7", 4, "3 to 5 m", "3m以上5m未満"),
    ("5-10", "#FF9191", 5, "5 to 10 m", "5m以上10m未満"),
    ("10-20", "#F285C9", 5, "10 to 20 m", "10m以上20m未満"),
    ("ge20", "#DC7ADC", 5, "20 m or more", "20m以上"),
)
# Inland flooding's legend (naisui_legend.png) paints the same colours, but depths under
# 0.1 m are not drawn, and a municipality whose map has no 0.3 m or 1 m step paints
# "0.1-0.5 m" and "0.5-3 m" in the 0.3-0.5 m and 1-3 m colours: those two say so. The
# levels are the depth rule's either way (under 0.5 m 2, 0.5-3 m 3).
INLAND_ROWS = (
    ("lt0.3", "#FFFFB3", 2, "0.1 to 0.3 m", "0.1m以上0.3m未満"),
    ("lt0.5", "#F7F5A9", 2, "0.1 to 0.5 m (0.3 to 0.5 m where the map has a 0.3 m step)",
     "0.1m以上0.5m未満（0.3mの区分がある地図では0.3m以上）"),
    ("0.5-1", "#F8E1A6", 3, "0.5 to 1 m", "0.5m以上1m未満"),
    ("0.5-3", "#FFD8C0", 3, "0.5 to 3 m (1 to 3 m where the map has a 1 m step)",
     "0.5m以上3m未満（1mの区分がある地図では1m以上）"),
    *DEPTH_ROWS[4:],
)  # fmt: skip


def _depth(
    source: str, rows: tuple[tuple[str, str, int, str, str], ...] = DEPTH_ROWS, weighed=True
):
    """Return the portal's eight-class depth legend (shinsui_legend3.png), one per dataset.

    weighed False: the classes set no level (0), as a detail of flood's (the planned scale).
    """
    return tuple(
        ZoneClass(key, colour, rank, en, ja, level if weighed else 0, source)
        for rank, (key, colour, level, en, ja) in enumerate(rows, start=1)
    )


# Flood duration (浸水継続時間): seven classes, none of which sets a level of its own (0):
# how long the water stays is a detail of flood, shown beside it, not weighed
# (docs/providers.md, "The headline").
DURATION_ROWS = (
    ("lt12h", "#A0D2FF", "under 12 hours", "12時間未満"),
    ("12h-1d", "#0041FF", "12 hours to 1 day", "12時間以上1日未満"),
    ("1d-3d", "#FAF500", "1 to 3 days", "1日以上3日未満"),
    ("3d-1w", "#FF9900", "3 days to 1 week", "3日以上1週間未満"),
    ("1w-2w", "#FF2800", "1 to 2 weeks", "1週間以上2週間未満"),
    ("2w-4w", "#B40068", "2 to 4 weeks", "2週間以上4週間未満"),
    ("ge4w", "#600060", "4 weeks or more", "4週間以上"),
)


def _duration() -> tuple[ZoneClass, ...]:
    """Return flood duration's seven classes, longest last, none setting a level."""
    return tuple(
        ZoneClass(key, colour, rank, en, ja, 0, DURATION_SOURCE)
        for rank, (key, colour, en, ja) in enumerate(DURATION_ROWS, start=1)
    )


def _collapse(key: str, en: str, ja: str) -> tuple[ZoneClass, ...]:
    """Return a house-collapse legend: one class, in the zone, the most severe level (5).

    The portal's text for such a zone is 「早期に立ち退き避難を」: staying upstairs does
    not help where the water's flow or an eroding bank can bring the house down.
    """
    return (ZoneClass(key, "#FF0000", 1, en, ja, 5, COLLAPSE_SOURCE),)


# The dark-blue dashed line the legends draw around a planned zone. Its exact colour is
# not among the recorded samples, so a pixel is read as that border by its hue: clearly
# blue (blue above red and green by BORDER_BLUE) and dark (BORDER_DARK at most on red).
BORDER_COLOUR = "#1E3C8C"  # what the report's map draws for it; matching uses the hue rule
BORDER_BLUE, BORDER_DARK = 64, 96


def _warning(kind: str, image: str, colours: tuple[str, str, str, str]) -> tuple[ZoneClass, ...]:
    """Return a landslide legend: designated and planned warning and special warning zones.

    A planned zone reads one level below its designated kind (docs/providers.md).
    """
    source = LEGEND_IMAGES + image
    warning, special, planned_warning, planned_special = colours
    return (
        ZoneClass(f"{kind}_planned_warning", planned_warning, 1, "warning zone (planned)",
                  "警戒区域（指定予定）", 2, source, planned=True),
        ZoneClass(f"{kind}_warning", warning, 2, "warning zone", "警戒区域", 3, source),
        ZoneClass(f"{kind}_planned_special", planned_special, 3, "special warning zone (planned)",
                  "特別警戒区域（指定予定）", 4, source, planned=True),
        ZoneClass(f"{kind}_special", special, 4, "special warning zone", "特別警戒区域", 5, source),
        ZoneClass(f"{kind}_planned_border", BORDER_COLOUR, 0, "on a planned zone's dashed border",
                  "指定予定区域の境界線上", 0, source, border=True),
    )  # fmt: skip


# One legend per portal dataset, by its path; the colours' sources are in each class.
LEGENDS: dict[str, tuple[ZoneClass, ...]] = {
    "01_flood_l2_shinsuishin_data": _depth(DEPTH_SOURCE),
    # The new-legend tsunami tiles link the same depth legend image (the catalogue).
    "04_tsunami_newlegend_data": _depth(DEPTH_SOURCE),
    # Storm surge: the same depth scale, as public projects record it (unconfirmed against
    # GSI's catalogue; docs/providers.md); `providers-check` is the operator's check.
    "03_hightide_l2_shinsuishin_data": _depth(DEPTH_SOURCE),
    "02_naisui_pref_data": _depth(INLAND_SOURCE, INLAND_ROWS),
    # Flood depth at the planned scale (計画規模, about once in 10 to 100 years): the same
    # depth legend, its classes setting no level: a smaller, more frequent flood than the
    # planned maximum already weighed, shown as a detail of flood (docs/providers.md).
    "01_flood_l1_shinsuishin_newlegend_data": _depth(PLANNED_SOURCE, weighed=False),
    # House collapse (家屋倒壊等氾濫想定区域), two datasets of one layer, and flood duration:
    # paths and colours third parties record (unconfirmed; docs/providers.md).
    "01_flood_l2_kaokutoukai_hanran_data": _collapse(
        "house_collapse_flow",
        "house-collapse zone: flood flow (氾濫流)",
        "家屋倒壊等氾濫想定区域（氾濫流）",
    ),
    "01_flood_l2_kaokutoukai_kagan_data": _collapse(
        "house_collapse_bank",
        "house-collapse zone: bank erosion (河岸侵食)",
        "家屋倒壊等氾濫想定区域（河岸侵食）",
    ),
    "01_flood_l2_keizoku_data": _duration(),
    "05_dosekiryukeikaikuiki_data": _warning(
        "debris_flow", "keikai_dosekiryu.png", ("#E6C832", "#A50021", "#EBD35B", "#B7334D")
    ),
    "05_kyukeishakeikaikuiki_data": _warning(
        "steep_slope", "keikai_kyukeisya.png", ("#FAE600", "#FA2800", "#FBEB33", "#FB5333")
    ),
    "05_jisuberikeikaikuiki_data": _warning(
        "landslide", "keikai_jisuberi.png", ("#FF9900", "#B40028", "#FFAD33", "#C33353")
    ),
}


def zones_of(legend: tuple[ZoneClass, ...]) -> tuple[ZoneClass, ...]:
    """Return a legend's zone classes (its borders left out)."""
    return tuple(zone for zone in legend if not zone.border)
