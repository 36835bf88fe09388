"""Compare the fallback's coarse outlines with the main source's, for units both have.

How far a unit's outline from smartnews-smri/japan-topography (N03-21_210101, simplified to
1 %) is from geolonia/japanese-admins' (N03-22_220101, as split from MLIT's file, before
this project's own simplification): the figures docs/providers.md quotes. Both read from
local (bare) clones with ``git show``, as scripts/build_outlines.py does:

    .venv/bin/python scripts/compare_outlines.py /path/to/japanese-admins.git \\
        /path/to/japan-topography.git 03 04 13 22 24 32 38 42 47 [--units 42204,47201]

Per unit: both areas, their intersection over union, the Hausdorff distance, how far the
coarse boundary strays from the real one at most, and the real outline's parts the coarse
one leaves out (islets). Distances are in km on a plane scaled by cos(latitude) at the
unit, close enough at these sizes. Prints the named units, then the spread over every unit
of the prefectures given.
"""

import argparse
import math
import sys
from pathlib import Path

import shapely

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_outlines import read_fallback, read_outline, rev_parse  # noqa: E402

KM_PER_DEGREE = 111.32


def flat(geometry, lat: float):
    k = math.cos(math.radians(lat)) * KM_PER_DEGREE
    return shapely.transform(geometry, lambda xy: xy * [k, KM_PER_DEGREE])


def compare(real, coarse) -> dict[str, float]:
    lat = real.centroid.y
    a, b = flat(real, lat), flat(coarse, lat)
    edge = shapely.points(shapely.get_coordinates(shapely.segmentize(b.boundary, 0.05)))
    dropped = [p for p in getattr(a, "geoms", [a]) if not p.intersects(b)]
    return {
        "area_real": a.area,
        "area_coarse": b.area,
        "iou": a.intersection(b).area / a.union(b).area,
        "hausdorff_m": 1000 * a.hausdorff_distance(b),
        "coarse_off_m": 1000 * shapely.distance(edge, a.boundary).max(),
        "islets_left_out": len(dropped),
        "islets_km2": sum(p.area for p in dropped),
    }


def quantile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("main_git_dir")
    parser.add_argument("fallback_git_dir")
    parser.add_argument("prefectures", nargs="+", help="two-digit codes: 42 47")
    parser.add_argument("--units", default="", help="5-digit codes to print one by one")
    args = parser.parse_args()
    main_commit = rev_parse(args.main_git_dir, "HEAD")
    fallback_commit = rev_parse(args.fallback_git_dir, "HEAD")
    named = set(filter(None, args.units.split(",")))
    rows = {}
    for pref in sorted(set(args.prefectures) | {c[:2] for c in named}):
        for code5, coarse in read_fallback(args.fallback_git_dir, fallback_commit, pref).items():
            real = read_outline(args.main_git_dir, main_commit, code5)
            if real is not None and (pref in args.prefectures or code5 in named):
                rows[code5] = compare(real, coarse)
    for code5 in sorted(named & rows.keys()):
        r = rows[code5]
        print(
            f"{code5}: area {r['area_real']:.2f} / {r['area_coarse']:.2f} km² "
            f"({100 * (r['area_coarse'] / r['area_real'] - 1):+.2f} %), IoU {r['iou']:.4f}, "
            f"Hausdorff {r['hausdorff_m']:.0f} m, coarse edge off by <= {r['coarse_off_m']:.0f} m, "
            f"{r['islets_left_out']} islets left out ({r['islets_km2']:.3f} km²)"
        )
    spread = [r for code5, r in rows.items() if code5[:2] in args.prefectures]
    if not spread:
        return
    print(f"{len(spread)} units of prefectures {' '.join(sorted(args.prefectures))}:")
    for key, unit in (("hausdorff_m", "m"), ("coarse_off_m", "m")):
        values = [r[key] for r in spread]
        print(
            f"  {key}: median {quantile(values, 0.5):.0f} {unit}, "
            f"p90 {quantile(values, 0.9):.0f} {unit}, max {max(values):.0f} {unit}"
        )
    ious = [r["iou"] for r in spread]
    off = [abs(r["area_coarse"] / r["area_real"] - 1) * 100 for r in spread]
    print(f"  IoU: median {quantile(ious, 0.5):.4f}, min {min(ious):.4f}")
    print(
        f"  area difference: median {quantile(off, 0.5):.2f} %, p90 {quantile(off, 0.9):.2f} %, "
        f"max {max(off):.2f} %"
    )
    with_islets = [r for r in spread if r["islets_left_out"]]
    print(
        f"  islets left out: {sum(r['islets_left_out'] for r in spread)} in "
        f"{len(with_islets)} units, {sum(r['islets_km2'] for r in spread):.2f} km² in all, "
        f"at most {max((r['islets_km2'] for r in spread), default=0):.2f} km² in one"
    )


if __name__ == "__main__":
    main()
