"""One assessment's work: fetch every hazard layer concurrently, then analyse."""

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from typing import Any

from ..singleflight import CacheStats, SingleFlightCache
from .analysis import LANGS, LAYERS, Layer, analyse
from .area import Area, tile_key
from .providers import DATASETS, LayerProvider

Fetched = dict[str, list[dict[str, float]]]


class Stopped(Exception):
    """The job stopped elsewhere; a layer still fetching gives up at its next call."""


def keys_for(area: Area, dataset: str) -> list[str]:
    """Return the keys by which a dataset is fetched for an area: its tiles, or its code."""
    if DATASETS[dataset].scope == "tile":
        return [tile_key(tile) for tile in area.tiles]
    return [area.code]


def run_assessment(
    area: Area,
    lang: str,
    *,
    provider: LayerProvider,
    cache: SingleFlightCache,
    progress: Callable[[str, int], None],
    cancelled: threading.Event | None = None,
) -> dict[str, Any]:
    """Fetch the area's hazard layers, analyse them and return the JSON-safe report.

    An exception from progress (the job was cancelled) or from the provider propagates at
    once; layers still fetching stop at their next upstream call, as they do once
    cancelled is set (the runner sets it when the job's row stops running).
    """
    if lang not in LANGS:
        raise ValueError(f"lang must be one of {LANGS}, not {lang!r}")
    counter = CacheStats()
    stop = threading.Event()

    def fetch(dataset: str, key: str) -> dict[str, float]:
        if stop.is_set() or (cancelled is not None and cancelled.is_set()):
            raise Stopped()
        return cache.get((dataset, key), lambda: provider.fetch(dataset, key), counter)

    def fetch_layer(layer: Layer) -> Fetched:
        return {ds: [fetch(ds, key) for key in keys_for(area, ds)] for ds in layer.datasets}

    total = len(LAYERS)
    progress(f"Fetching {total} hazard layers", 0)
    fetched: dict[str, Fetched] = {}
    pool = ThreadPoolExecutor(max_workers=total, thread_name_prefix="assessment-layer")
    try:
        pending: dict[Future[Fetched], Layer] = {
            pool.submit(fetch_layer, layer): layer for layer in LAYERS
        }
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                layer = pending.pop(future)
                fetched[layer.key] = future.result()  # a provider error raises here
                n = len(fetched)
                progress(f"Fetched layer {n} of {total} ({layer.key})", 5 + 85 * n // total)
    finally:
        # On success every layer is done; on an error, the others stop at their next call.
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)

    progress("Analysing", 95)
    report = {
        "area": area.to_dict(),
        "lang": lang,
        **analyse(area, lang, fetched),
        "provider": provider.name,
        "demo": bool(provider.is_demo),
        "cache": counter.as_dict(),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    progress("Report ready", 100)
    return report
