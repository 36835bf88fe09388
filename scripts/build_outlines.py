"""Build app/assessment/registers/data/outlines.zip: each current municipality's outline, simplified.

Source: MLIT's 国土数値情報 行政区域データ (N03), edition N03-22_220101 (as of 2022-01-01), as
split into one GeoJSON per municipality (wards of designated cities apart) by the GitHub
repository geolonia/japanese-admins (``docs/{pref}/{code5}.json``). Run it on a local
clone of that repository (a bare one is enough: the files are read with ``git show``):

    .venv/bin/python scripts/build_outlines.py /path/to/japanese-admins.git [--commit SHA] \
        [--fallback /path/to/japan-topography.git [--fallback-commit SHA]]

Fallback source (optional, for the units the first one lacks): the same MLIT data, edition
N03-21_210101 (as of 2021-01-01), as per-prefecture FeatureCollections simplified to 1 %
(簡素化1％) by the GitHub repository smartnews-smri/japan-topography
(``data/municipality/geojson/s0010/N03-21_{pref}_210101.json``, one feature per unit, its
code in N03_007), again read from a local (bare) clone with ``git show``.

What it writes, per current unit of the gazetteer (app/assessment/place/gazetteer.py):
- the unit's own outline where the source has it;
- a designated city (札幌市): the list of its wards, united when read;
- a unit newer than the source (Hamamatsu's 2024 wards): the union of the units it
  absorbed, per data/municipal_changes.csv, marked approximate (浜松市北区 went partly to
  中央区 and partly to 浜名区; the union gives it whole to 浜名区, which took most of it);
- where the source file is absent (長崎市: the clone lacks its largest files) and a fallback
  is given: that unit's coarser outline from the fallback, marked approximate
  (COARSE_REASON), index.json's meta naming the fallback's provenance and commit;
- nothing where neither source has it: index.json lists those as missing, and the
  assessment reads a circle around the unit's recorded centre instead, saying so.
Each outline is simplified (TOLERANCE degrees, topology preserved), its coordinates
rounded to DIGITS decimals, and stored as its own zip member, so the app reads only the
outlines it needs (app/assessment/registers/outlines.py). index.json holds every unit's bounding box
(for naming the municipality a point lies in), the approximations and the provenance.
"""

import argparse
import io
import json
import subprocess
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import shapely
from shapely.geometry import mapping, shape

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.assessment.place.gazetteer import gazetteer  # noqa: E402
from app.assessment.registers import changes  # noqa: E402

OUT = ROOT / "app" / "assessment" / "registers" / "data" / "outlines.zip"
TOLERANCE = 0.0004  # degrees: about 40 m
DIGITS = 4  # about 10 m
SOURCE = {
    "dataset": "国土数値情報 行政区域データ (N03), N03-22_220101 (2022-01-01)",
    "publisher": "国土交通省 (MLIT), https://nlftp.mlit.go.jp/ksj/gml/datalist/KsjTmplt-N03-v3_1.html",
    "via": "https://github.com/geolonia/japanese-admins (docs/{pref}/{code5}.json)",
    "licence": (
        "国土数値情報 N03 is published for use with attribution under MLIT's terms "
        "for 国土数値情報 "
        "(出典: 「国土数値情報（行政区域データ）」（国土交通省）を加工して作成); "
        "geolonia/japanese-admins is MIT-licensed (Copyright 2020 Geolonia Inc.)"
    ),
    "credit_ja": "「国土数値情報（行政区域データ）」（国土交通省）を加工して作成",
    "credit_en": (
        "Administrative boundaries: MLIT National Land Numerical Information (N03), processed"
    ),
}
COARSE_REASON = (
    "coarser outline: N03-21_210101 (2021-01-01) simplified to 1 %, "
    "via smartnews-smri/japan-topography"
)
FALLBACK = {
    "dataset": "国土数値情報 行政区域データ (N03), N03-21_210101 (2021-01-01), simplified to 1 %",
    "publisher": SOURCE["publisher"],
    "via": (
        "https://github.com/smartnews-smri/japan-topography "
        "(data/municipality/geojson/s0010/N03-21_{pref}_210101.json: MLIT's data fetched "
        "2021-09-28, simplified to 1 %, its README's 簡素化1％)"
    ),
    "licence": (
        "国土数値情報 N03 under MLIT's terms, as above; smartnews-smri/japan-topography's "
        "README (クレジット): free to use, commercially or not, the processor (SmartNews "
        "Media Research Institute) need not be credited, MLIT's credit is required"
    ),
    "credit_ja": SOURCE["credit_ja"],
    "credit_en": SOURCE["credit_en"],
    "used_for": COARSE_REASON,
}


def git_show(git_dir: str, commit: str, path: str) -> bytes | None:
    done = subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], capture_output=True
    )
    return done.stdout if done.returncode == 0 else None


def read_outline(git_dir: str, commit: str, code5: str):
    body = git_show(git_dir, commit, f"docs/{code5[:2]}/{code5}.json")
    if body is None:
        return None
    collection = json.loads(body)
    parts = [shape(f["geometry"]) for f in collection["features"] if f.get("geometry")]
    return shapely.union_all([shapely.make_valid(p) for p in parts]) if parts else None


def read_fallback(git_dir: str, commit: str, pref: str) -> dict[str, object]:
    """Return one prefecture's coarse outlines from japan-topography, by 5-digit code."""
    path = f"data/municipality/geojson/s0010/N03-21_{pref}_210101.json"
    body = git_show(git_dir, commit, path)
    if body is None:
        return {}
    found: dict[str, list] = {}
    for feature in json.loads(body)["features"]:
        code5 = (feature.get("properties") or {}).get("N03_007")
        if code5 and feature.get("geometry"):  # 所属未定地 have no code
            found.setdefault(code5, []).append(shapely.make_valid(shape(feature["geometry"])))
    return {code5: shapely.union_all(parts) for code5, parts in found.items()}


def rev_parse(git_dir: str, commit: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, "rev-parse", commit],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def compact(geometry):
    simple = shapely.simplify(geometry, TOLERANCE, preserve_topology=True)
    simple = shapely.set_precision(simple, 10**-DIGITS)
    polygons = [g for g in getattr(simple, "geoms", [simple]) if g.geom_type == "Polygon"]
    return shapely.MultiPolygon(polygons) if len(polygons) != 1 else polygons[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir")
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--fallback", help="a clone of smartnews-smri/japan-topography")
    parser.add_argument("--fallback-commit", default="HEAD")
    args = parser.parse_args()
    commit = rev_parse(args.git_dir, args.commit)
    fallback_commit = rev_parse(args.fallback, args.fallback_commit) if args.fallback else ""
    coarse: dict[str, dict[str, object]] = {}

    def coarse_outline(code5: str):
        if not args.fallback:
            return None
        if code5[:2] not in coarse:
            coarse[code5[:2]] = read_fallback(args.fallback, fallback_commit, code5[:2])
        return coarse[code5[:2]].get(code5)

    gaz = gazetteer()
    abolished = changes.load()
    absorbed: dict[str, list[str]] = {}
    for code5, change in abolished.items():
        # A unit split among several successors goes whole to the last one listed (浜名区).
        absorbed.setdefault(change.new_codes[-1][:5], []).append(code5)
    raw: dict[str, object] = {}

    def outline(code5: str):
        if code5 not in raw:
            raw[code5] = read_outline(args.git_dir, commit, code5)
        return raw[code5]

    index: dict[str, dict] = {}
    missing: list[str] = []
    fallen_back: list[str] = []
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for area in sorted(gaz.areas, key=lambda a: a.code5):
            code5, entry = area.code5, {"name": area.prefecture_ja + area.name_ja}
            geometry = outline(code5)
            if geometry is None and code5 in absorbed:
                parts = [outline(old) for old in absorbed[code5]]
                if all(p is not None for p in parts):
                    geometry = shapely.union_all(parts)
                    entry["approximate"] = "union of " + "、".join(
                        abolished[old].old_name for old in absorbed[code5]
                    )
            if geometry is None:
                wards = [
                    a
                    for a in gaz.areas
                    if gaz.is_ward(a)
                    and a.code[:2] == area.code[:2]
                    and a.name_ja.startswith(area.name_ja)
                    and a.code5 != code5
                ]
                parts = [outline(w.code5) for w in wards]
                if wards and all(p is not None for p in parts):
                    # Stored as the list of its wards: the app unites them when asked.
                    entry["union_of"] = [w.code5 for w in wards]
                    boxes = [compact(p).bounds for p in parts]
                    entry["bbox"] = [
                        round(min(b[0] for b in boxes), DIGITS),
                        round(min(b[1] for b in boxes), DIGITS),
                        round(max(b[2] for b in boxes), DIGITS),
                        round(max(b[3] for b in boxes), DIGITS),
                    ]
                    index[code5] = entry
                    continue
                if not wards or any(p is None for p in parts):
                    # A designated city newer than its wards' source codes (浜松市): the
                    # wards it had then.
                    olds = [
                        c
                        for c in abolished
                        if abolished[c].old_name.startswith(area.prefecture_ja + area.name_ja)
                    ]
                    parts = [outline(c) for c in olds]
                if parts and all(p is not None for p in parts):
                    geometry = shapely.union_all(parts)
                    entry["union_of_wards"] = True
            if geometry is None and (geometry := coarse_outline(code5)) is not None:
                entry["approximate"] = COARSE_REASON
                fallen_back.append(code5)
            if geometry is None or geometry.is_empty:
                missing.append(code5)
                entry["missing"] = True
                index[code5] = entry
                continue
            geometry = compact(geometry)
            entry["bbox"] = [round(v, DIGITS) for v in geometry.bounds]
            index[code5] = entry
            archive.writestr(f"{code5}.json", json.dumps(mapping(geometry), separators=(",", ":")))
        meta = {
            "source": SOURCE,
            "commit": commit,
            "built": datetime.now(UTC).date().isoformat(),
            "tolerance_degrees": TOLERANCE,
            "digits": DIGITS,
            "missing": missing,
        }
        if args.fallback:
            meta["fallback"] = {**FALLBACK, "commit": fallback_commit, "units": fallen_back}
        archive.writestr(
            "index.json",
            json.dumps({"meta": meta, "areas": index}, ensure_ascii=False, separators=(",", ":")),
        )
    OUT.write_bytes(buffer.getvalue())
    print(
        f"{OUT}: {len(index)} units, {len(fallen_back)} from the fallback, "
        f"{len(missing)} missing, {len(buffer.getvalue())} bytes"
    )
    print("from the fallback:", " ".join(f"{c} {index[c]['name']}" for c in fallen_back))
    print("missing:", " ".join(f"{c} {index[c]['name']}" for c in missing))


if __name__ == "__main__":
    main()
