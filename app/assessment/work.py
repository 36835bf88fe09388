"""One assessment's work: fetch every hazard layer concurrently, then analyse."""

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from typing import Any

from ..singleflight import CacheStats, SingleFlightCache
from .analysis import LANGS, LAYERS, Layer, analyse
from .area import Area, tile_key
from .providers import DATASETS, LayerProvider, Stopped

Fetched = dict[str, list[dict[str, float]]]


# How often the job's thread looks at its stop signal while layers fetch: a stopped
# job gives its runner slot back this soon, whatever its fetches are waiting on.
STOP_CHECK_SECONDS = 0.1


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
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Fetch the area's hazard layers, analyse them and return the JSON-safe report.

    An exception from progress (the job was cancelled) or from the provider propagates at
    once, and so does Stopped once the job's stop signal is set, even while a fetch is
    under way; layers still fetching give up (the demo at once, http after its call).
    """
    if lang not in LANGS:
        raise ValueError(f"lang must be one of {LANGS}, not {lang!r}")
    counter = CacheStats()
    stop = stop or threading.Event()

    def fetch(dataset: str, key: str) -> dict[str, float]:
        while True:
            if stop.is_set():
                raise Stopped()
            try:  # by keyword: a routing provider passes it through to the real one
                return cache.get(
                    (dataset, key), lambda: provider.fetch(dataset, key, stop=stop), counter
                )
            except Stopped:
                if stop.is_set():
                    raise
                # We joined another job's fetch of this key and that job stopped: this
                # one has not, so it fetches the key itself.

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
            done, _ = wait(pending, timeout=STOP_CHECK_SECONDS, return_when=FIRST_COMPLETED)
            if stop.is_set():
                raise Stopped()
            for future in done:
                layer = pending.pop(future)
                fetched[layer.key] = future.result()  # a provider error raises here
                n = len(fetched)
                progress(f"Fetched layer {n} of {total} ({layer.key})", 5 + 85 * n // total)
    except BaseException:
        # The others stop at their next call, or at once if they are waiting on one.
        stop.set()
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # on success every layer is done

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
