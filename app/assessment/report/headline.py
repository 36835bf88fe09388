"""A report's headline: the overall level, the score and the layers that decide them.

One rule, short enough to print beside the score: the overall level is the worst layer's
level; the score, 0 to 100, is the weighted mean of the layers' indexes times 100, kept
inside that level's band (level 1 is 0-19, 2 is 20-39, 3 is 40-59, 4 is 60-79, 5 is
80-100): a mean below the band is raised to its foot. So the score, its label and the
worst layer agree by construction, and a mean can never hide one high hazard behind a
mild word.

Every layer at the worst level is named: a tie is said as a tie, never settled by order.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

BAND = 20  # score points per level


def band(level: int) -> tuple[int, int]:
    """Return the lowest and highest score of a level's band (level 5 ends at 100)."""
    low = BAND * (level - 1)
    return low, 100 if level == 5 else low + BAND - 1


def level_of_score(score: int) -> int:
    """Return the level whose band holds a score from 0 to 100."""
    return min(5, 1 + score // BAND)


@dataclass(frozen=True)
class Headline:
    """The overall level, the score in its band, and the layers at each extreme."""

    level: int
    score: int
    worst: tuple[str, ...]  # keys of every layer at the worst level, in report order
    least: tuple[str, ...]  # keys of every layer at the mildest level
    at_spot: bool = False  # a point's headline, read at the spot (not its circle's)


def headline(layers: Sequence[Mapping[str, Any]], weights: Mapping[str, float]) -> Headline:
    """Decide the headline from each layer's key, index (0 to 1) and level (1 to 5).

    A layer without a level (no zone found, not published, not read) does not count.
    """
    layers = [row for row in layers if row.get("level")]
    level = max(row["level"] for row in layers)
    mildest = min(row["level"] for row in layers)
    total = sum(weights[row["key"]] for row in layers)
    mean = sum(weights[row["key"]] * row["index"] for row in layers) / total
    low, high = band(level)
    # A mean never exceeds the worst index, but rounding may carry it to the next band.
    score = min(high, max(low, round(100 * mean)))
    return Headline(
        level=level,
        score=score,
        worst=tuple(row["key"] for row in layers if row["level"] == level),
        least=tuple(row["key"] for row in layers if row["level"] == mildest),
    )
