"""Single-flight: upstream calls per 100 concurrent misses of one key, and a hit's cost.

In-process, against app.singleflight.SingleFlightCache:
- misses: 100 threads released together by a barrier ask for one new key whose
  upstream call takes 50 ms; counted: upstream calls (target 1). Baseline, same run:
  "look in a locked TTLCache, else fetch and store" (what the cache replaces).
- hits: the cost per call of get() on a cached key, with and without the per-job
  counter that app/assessment/work.py passes; baselines: a plain dict lookup, a
  cachetools.TTLCache lookup, and a TTLCache lookup under a threading.Lock. Best of
  7 repeats (the least disturbed by the noisy machine).
"""

import threading
import time
from collections.abc import Callable

from cachetools import TTLCache

from app.caches.singleflight import CacheStats, SingleFlightCache

from .common import best_ns
from .table import Row, check, compare, div, num, table

UPSTREAM_SECONDS = 0.05


def _storm(get: Callable[[object, Callable[[], int]], int], key: object, threads: int) -> int:
    calls = 0
    lock = threading.Lock()

    def upstream() -> int:
        nonlocal calls
        with lock:
            calls += 1
        time.sleep(UPSTREAM_SECONDS)
        return 42

    barrier = threading.Barrier(threads)
    results: list[int] = []

    def caller() -> None:
        barrier.wait(timeout=10)
        results.append(get(key, upstream))

    pool = [threading.Thread(target=caller) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=10)
    if len(results) != threads or set(results) != {42}:
        raise RuntimeError(f"storm: {len(results)} results {set(results)}")
    return calls


def misses(rounds: int = 20, threads: int = 100) -> dict:
    cache = SingleFlightCache(maxsize=1024, ttl=300)
    ours = [_storm(cache.get, ("elevation", f"tile-{r}"), threads) for r in range(rounds)]

    naive_store: TTLCache = TTLCache(maxsize=1024, ttl=300)
    naive_lock = threading.Lock()

    def naive_get(key: object, factory: Callable[[], int]) -> int:
        with naive_lock:
            if key in naive_store:
                return naive_store[key]
        value = factory()
        with naive_lock:
            naive_store[key] = value
        return value

    naive = [_storm(naive_get, ("elevation", f"tile-{r}"), threads) for r in range(rounds)]
    out = {"threads": threads, "rounds": rounds, "upstream_calls_per_round": ours}
    out |= {"max_calls": max(ours), "naive_calls_per_round": naive}
    out |= {"naive_mean_calls": sum(naive) / len(naive)}
    return out


def hits(n: int = 200_000, repeats: int = 7) -> dict:
    key = ("elevation", "12/3640/1514")
    value = {"min_m": 1.0}
    cache = SingleFlightCache(maxsize=4096, ttl=300)
    cache.get(key, lambda: value)
    counter = CacheStats()
    plain = {key: value}
    ttl: TTLCache = TTLCache(maxsize=4096, ttl=300)
    ttl[key] = value
    lock = threading.Lock()

    def factory() -> dict:
        raise AssertionError("a hit must not call upstream")

    def locked_ttl() -> dict:
        with lock:
            return ttl[key]

    lookups = {
        "empty_call": lambda: None,  # the loop and call overhead
        "singleflight_get": lambda: cache.get(key, factory),
        "singleflight_get_counter": lambda: cache.get(key, factory, counter),
        "dict": lambda: plain[key],
        "ttlcache": lambda: ttl[key],
        "locked_ttlcache": locked_ttl,
    }
    return {"calls": n} | {f"{k}_ns": best_ns(call, n, repeats) for k, call in lookups.items()}


def run(db: None = None) -> dict:
    """Both, in this process (no database)."""
    return {"misses": misses(), "hits": hits()}


NUMBER, NAME = "4", "single-flight"
LOOKUPS = ("singleflight_get", "singleflight_get_counter", "locked_ttlcache", "ttlcache", "dict")


def summary(r: dict) -> list[Row]:
    """Rows 4a-4b: upstream calls per 100 concurrent misses (target 1), a hit's cost."""
    m, h = r.get("misses", {}), r.get("hits", {})
    hit, locked = h.get("singleflight_get_counter_ns"), h.get("locked_ttlcache_ns")
    return [
        compare("4a", "upstream calls per 100 concurrent misses of one key"
                f" (max of {m.get('rounds')} rounds)", m.get("max_calls"),
                m.get("naive_mean_calls"), "check-then-fetch", 0, target="1",
                ok=check(m.get("max_calls"), lambda v: v == 1)),
        Row("4b", "cache hit, per call (`get(key, f, counter)` as jobs call it)",
            num(hit, 0, " ns"), f"locked TTLCache {num(locked, 0, ' ns')};"
            f" dict {num(h.get('dict_ns'), 0, ' ns')}", num(div(hit, locked), 1, "x"),
            "(no target)"),
    ]  # fmt: skip


def details(r: dict) -> list[str]:
    """Section 4: the calls of every round of misses, every lookup's time per hit."""
    m, h = r["misses"], r["hits"]
    return [
        "## 4. Single-flight",
        "",
        f"Misses: {m['threads']} threads released by a barrier ask for one new"
        " key whose upstream call takes 50 ms; upstream calls per round:"
        f" {m['upstream_calls_per_round']} (check-then-fetch baseline:"
        f" {m['naive_calls_per_round'][:5]}...).",
        "",
        f"Hits, ns per call (best of 7 x {h['calls']:,}; an empty call costs"
        f" {h['empty_call_ns']:.0f} ns):",
        "",
        *table(("lookup", "ns"), ((k, f"{h[k + '_ns']:.0f}") for k in LOOKUPS)),
        "",
    ]
