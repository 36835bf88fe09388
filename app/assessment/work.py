"""One assessment's work: fetch every hazard layer concurrently, then analyse.

The fetches are asks in the process's fetch pool (fetchers.py), fair per job; this job's
own thread drives its layers side by side as readers (read_layer and those below it).

A zone dataset's tiles are decoded and counted over the area's outline as they arrive
(zones.py, tiles.py), in the pixel pool (pixels.py), away from the worker's GIL: only the
counts and a shrunk raster for the map are kept, never the tiles, so a job's memory does
not grow with its tiles. Progress is the mean, over the layers read for the place, of each
layer's own tiles and meshes fetched of those it planned (progress_of), written through the
job's usual progress (at most every PROGRESS_SECONDS, and once as each layer ends). Then
the layers are analysed and the report put together (assemble.py: the maps, the spot, the
evacuation sites).
"""

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from ..caches.singleflight import CacheStats, SingleFlightCache
from . import fetchers
from .assemble import Fetched, at_the_spot, compose, draw_zones, the_map, where_to_go
from .errors import ProviderError, Stopped, UnreadableTiles
from .grid import legends, locate, pixels, tiles, zones
from .place.area import Area
from .report import maps, provenance, sites, spot
from .report.analysis import LANGS, LAYERS, Layer, analyse, describe
from .sources import basemap, coverage, evacuation, portal, terms
from .sources.providers import DATASETS, LayerProvider, default_keys, origin_of

Paced = Callable[[int], fetchers.Reader]  # a dataset's pause before n of its calls


# How often the job's thread looks at its stop signal while layers fetch: a stopped
# job gives its runner slot back this soon, whatever its fetches are waiting on.
STOP_CHECK_SECONDS = 0.1

# The step a fetching job records: this prefix and the keys of the layers fetched so far,
# comma-separated, so the page can tick each layer by its name (app/jobs/views.py).
LAYERS_STEP = "layers:"
ANALYSING_STEP = "Analysing"
PROGRESS_SECONDS = 1.0
# Asks of one dataset in the job's queue at once (fetchers.py): its tiles' PNGs waiting to
# be worked are at most these. How many of a job's asks run at once is the pool's share.
WINDOW = 4
BESIDE = "beside the layers"  # the base map and the sites every point report lists


def layers_step(keys: list[str]) -> str:
    """Return the step that says which layers are fetched, in the order they finished."""
    return LAYERS_STEP + ",".join(keys)


def progress_of(
    read: list[Layer], planned: dict[str, int], done: dict[str, int], finished: set[str]
) -> int:
    """Return the bar while layers are fetched: 0 to 90, the read layers' mean share done.

    Each layer read for the place counts its own tiles and meshes done of those it planned
    (a finished layer all of them), so a layer ticked on the page has moved the bar by
    exactly its share. A layer with nothing to read here (not published for the place,
    its terms forbid it, or no key in its plan) is not counted: it ticks at once, and
    neither moves the bar nor holds it back. Each share only grows: so does the bar.
    Nothing read is 0, not a token start: the time left takes any progress for the job's
    own pace (app/jobs/estimate.py), and at 0 counts the recent jobs' time down instead.
    """
    shares = []
    for layer in read:
        wanted = sum(planned[ds] for ds in layer.datasets)
        if not wanted:
            continue
        got = sum(min(done[ds], planned[ds]) for ds in layer.datasets)
        shares.append(1.0 if layer.key in finished else got / wanted)
    return int(90 * sum(shares) / len(shares)) if shares else 0


def keys_for(area: Area, dataset: str, provider: LayerProvider | None = None) -> list[str]:
    """Return the keys by which a dataset is fetched for an area, as its provider asks."""
    keys = getattr(provider, "keys", None)
    found = keys(area, dataset) if keys is not None else default_keys(area, dataset)
    # A prefecture's landslide tiles are read only where its terms allow a sold report:
    # an extent across a border is not ruled by its own prefecture's terms alone.
    return terms.readable_keys(dataset, found)


def describe_sources(provider: LayerProvider, fetched: dict[str, Fetched], area: Area) -> dict:
    """Say per dataset where its figures came from and from how many points."""
    sources: dict[str, dict[str, Any]] = {}
    for per_layer in fetched.values():
        for dataset, answers in per_layer.items():
            if dataset in sources:
                continue
            describe = getattr(provider, "source", None)
            info = dict(describe(dataset)) if describe else {"real": not provider.is_demo}
            if DATASETS[dataset].scope == "zones":
                info.update({k: answers[0][k] for k in ("zoom", "tiles", "metres_per_pixel")})
                info["points"] = info["asked"] = answers[0]["tiles"]
            else:
                info["points"] = sum(not a.get("no_data") for a in answers)
                info["asked"] = len(keys_for(area, dataset, provider))
            notes = sorted({str(a["source"]) for a in answers if a.get("source")})
            if notes:
                info["notes"] = notes
            sources[dataset] = info
    return sources


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

    def fetch(dataset: str, key: str) -> dict[str, Any] | None:
        while True:
            if stop.is_set():
                raise Stopped()
            try:  # by keyword: a routing provider passes it through to the real one
                # Keyed by who answers too: one source's answer is never read as another's.
                return cache.get(
                    (dataset, key, origin_of(provider, dataset)),
                    lambda: provider.fetch(dataset, key, stop=stop),
                    counter,
                )
            except Stopped:
                if stop.is_set():
                    raise
                # We joined another job's fetch of this key and that job stopped: this
                # one has not, so it fetches the key itself.

    zone_plan = zones.plan(area)  # kept per place, with its masks (zones.Plan.masks)
    masks = zone_plan.masks
    read = [layer for layer in LAYERS if not coverage.unread(layer.key, area)[0]]
    datasets = [ds for layer in read for ds in layer.datasets]
    planned = {ds: len(keys_for(area, ds, provider)) for ds in dict.fromkeys(datasets)}
    done_keys = dict.fromkeys(planned, 0)  # per dataset: each layer's bar is its own
    done_lock = threading.Lock()
    # A point's report also says what lies at the spot itself (report/spot.py).
    here = (area.lat, area.lon) if getattr(area, "radius_m", 0) else None
    spots: dict[str, tuple[tuple[legends.ZoneClass, ...], int, locate.Nearest]] = {}
    rasters: dict[str, maps.ZoneRaster] = {}

    def tick(dataset: str) -> None:
        with done_lock:
            done_keys[dataset] += 1

    def read_zones(dataset: str, keys: list[str], paced: Paced) -> fetchers.Reader:
        legend = legends.LEGENDS[portal.ZONE_DATASETS[dataset]]
        reading = tiles.Reading.start(legend, zone_plan.outline.geometry)
        raster = rasters[dataset] = maps.ZoneRaster(
            legend, zone_plan.outline.geometry.bounds, zone_plan.zoom
        )
        near: locate.Nearest = {}

        # A tile of a dataset published per prefecture is one key per prefecture read.
        by_tile: dict[str, list[str]] = {}
        for key in keys:
            by_tile.setdefault(portal.split_key(key)[1], []).append(key)
        prefectures = sorted({portal.split_key(key)[0] for key in keys})

        def fetched(tile_keys: list[str]) -> list[tuple[str, bytes | None]]:
            answers = [(key, fetch(dataset, key) or {"png": None}) for key in tile_keys]
            return [(key, portal.decode_answer(answer)) for key, answer in answers]

        def worked(fn: Callable[..., Any], *args: Any) -> Any:
            """Return fn(*args) of a tile's PNGs, in the pixel pool when there is one."""
            try:
                return pixels.call(fn, *args)
            except pixels.Unreadable as exc:  # not a PNG tile Pillow can read
                key = exc.args[0]
                raise ProviderError(dataset, key, "the tile is not a readable PNG") from exc

        # The fetches are asks in the process's pool, WINDOW tiles at a time; each tile's
        # pixel work in one turn (pixels.Turns) here, all of it in the pixel pool when
        # there is one: only its counts, a shrunk copy and what lies nearest the spot are
        # kept, so at most a window of tiles' PNGs waits to be worked.
        batch = list(by_tile)
        for start in range(0, len(batch), WINDOW):
            part = batch[start : start + WINDOW]
            yield from paced(sum(len(by_tile[tile_key]) for tile_key in part))
            answers = yield [partial(fetched, by_tile[tile_key]) for tile_key in part]
            for tile_key, pngs in zip(part, answers, strict=True):
                tile = tiles.parse_tile_key(tile_key)
                packed = masks.packed(tile)
                if all(png is None for _, png in pngs):  # not published: nothing to decode
                    worked_out = pixels.unpublished(packed, len(legend), raster.factor)
                else:
                    with pixels.turn():
                        if stop.is_set():  # stopped while in line: the turn goes to the next
                            raise Stopped()
                        worked_out = worked(
                            pixels.work_tile,
                            tile,
                            pngs,
                            legend,
                            packed,
                            raster.factor,
                            raster.ranks,
                            here,
                        )
                counted, missing, seen, small, found = worked_out
                reading.take(counted)
                reading.missing += missing
                for colours, kept in zip(seen, (reading.unknown, reading.stray), strict=True):
                    for colour, n in colours.items():
                        kept[colour] = kept.get(colour, 0) + n
                raster.add(tile, small)
                locate.merge_nearest(near, found)
                for _ in by_tile[tile_key]:
                    tick(dataset)
            answers = pngs = None  # this window's PNGs go before the next is asked
        answer = maps.as_answer(reading, zone_plan)
        if reading.unreadable():
            off = UnreadableTiles(
                dataset, portal.ZONE_DATASETS[dataset], reading.unknown_share(), reading.unknown
            )
            if dataset not in portal.UNCONFIRMED:
                # Colours of no class of a published legend: the publisher changed it, or
                # these are not its tiles. Never "no zone": the job fails and refunds.
                raise off
            # A legend only third parties record (portal.UNCONFIRMED): tiles off it say the
            # record is wrong, not that the portal is broken. Every colour off it could be
            # any class, the worst too: the layer is uncertain (never a lower level), the
            # report is delivered, and an operator is told (job.alerts).
            answer["stray"] = dict(reading.unknown)
            answer["unreadable"] = {
                "path": off.path,
                "share": round(off.share, 4),
                "colours": off.seen,
            }
        if here:  # the pixel under the spot, at the portal's deepest zoom: one more tile
            tile, col, row = locate.pixel_of(*here, spot.SPOT_ZOOM)
            tile_key = tiles.tile_key(tile)
            spot_keys = [f"{pref}/{tile_key}" if pref else tile_key for pref in prefectures]
            (pngs,) = yield [partial(fetched, spot_keys)]
            with pixels.turn():
                at = worked(pixels.class_at, pngs, legend, col, row)
            spots[dataset] = (legend, at, near)
        return [answer]

    def read_meshes(dataset: str, keys: list[str], paced: Paced) -> fetchers.Reader:
        # None: the source has no data at that key (a mesh of water); the rest decide.
        answers = []
        for start in range(0, len(keys), WINDOW):
            part = keys[start : start + WINDOW]
            yield from paced(len(part))
            got = yield [partial(fetch, dataset, key) for key in part]
            for key, answer in zip(part, got, strict=True):
                tick(dataset)
                answers.append(
                    {"key": key, "no_data": True} if answer is None else {**answer, "key": key}
                )
        if all(a.get("no_data") for a in answers):
            reason = f"the service has no data at any of the {len(keys)} places asked"
            raise ProviderError(dataset, area.code, reason)
        return answers

    def read_layer(layer: Layer) -> fetchers.Reader:
        """Read a layer's datasets in turn (the demo pausing before each window of calls)."""
        out: Fetched = {}
        pause = getattr(provider, "pause", None)
        calls = sum(planned[ds] for ds in layer.datasets)

        def paced(dataset: str, n: int) -> fetchers.Reader:
            # The demo's stand-in for real calls' time: n of the layer's calls' share of it.
            if pause is not None and (seconds := pause(dataset, n / calls)) > 0:
                yield fetchers.Pause(seconds)

        for dataset in layer.datasets:
            if stop.is_set():  # a dataset that starts after the job stopped asks nothing
                raise Stopped()
            keys = keys_for(area, dataset, provider)
            reader = read_zones if DATASETS[dataset].scope == "zones" else read_meshes
            out[dataset] = yield from reader(dataset, keys, partial(paced, dataset))
        return out

    def read_base_map() -> fetchers.Reader:
        base = getattr(provider, "basemap", None)
        if base is None:
            return {"base": None, "base_reason": "demo"}
        box = maps.view_box(zone_plan.outline.geometry.bounds)
        zoom, wanted = basemap.plan(box)

        def one(tile: Any) -> bytes | None:
            key = tiles.tile_key(tile)
            answer = cache.get(
                (basemap.DATASET, key, f"gsi {base.base_url}"),  # keyed by who answers, as fetch()
                lambda: base.fetch(key, stop),
                counter,
            )
            return portal.decode_answer(answer)

        pngs = {}
        try:
            for tile in wanted:  # one at a time, beside the layers (which take longer)
                (pngs[tile],) = yield [partial(one, tile)]
        except ProviderError:
            # The zones stand without it: the map says the base map could not be read.
            return {"base": None, "base_reason": "unavailable"}
        return {"box": box, "zoom": zoom, "pngs": pngs}

    def percent() -> int:
        with done_lock:
            done = dict(done_keys)
        return progress_of(read, planned, done, finished=set(fetched))

    def fetch_sites(code: int, key: str) -> dict[str, Any]:
        if stop.is_set():
            raise Stopped()
        source = provider.evacuation  # type: ignore[attr-defined]
        return cache.get(
            (evacuation.dataset(code), key, source.origin()),  # keyed by who answers, as fetch()
            lambda: source.fetch(code, key, stop),
            counter,
        )

    sites_down = threading.Event()

    def beside_the_layers() -> fetchers.Reader:
        base = yield from read_base_map()
        if here and getattr(provider, "evacuation", None) is not None:
            # Earthquake's sites are listed in every point report: read beside the layers;
            # the other types wait for the layers to say their hazard is present.
            try:
                for key in evacuation.tile_keys(*here, sites.reach_m(area.radius_m)):
                    yield [partial(fetch_sites, sites.EVERYWHERE, key)]
            except ProviderError:
                # Not asked again after the layers: a report does not wait twice on a
                # service that is down. It says the sites could not be read.
                sites_down.set()
        return base

    progress(layers_step([]), 0)
    fetched: dict[str, Fetched] = {}
    for layer in LAYERS:  # not published for the place, or its terms forbid it: done
        if layer not in read:
            fetched[layer.key] = {}
            progress(layers_step(list(fetched)), 0)
    beside: dict[str, Any] = {}
    written, written_at = 0, time.monotonic()

    def done(key: str, value: Any) -> None:
        nonlocal written, written_at
        if key == BESIDE:
            beside.update(value)
            return
        # Written when a layer finishes (one step per layer, so the page ticks each, the
        # bar by that layer's whole share).
        fetched[key] = value
        written, written_at = max(written, percent()), time.monotonic()
        progress(layers_step(list(fetched)), written)

    def turn() -> None:
        nonlocal written, written_at
        # ... and at most every PROGRESS_SECONDS while they fetch.
        if time.monotonic() - written_at >= PROGRESS_SECONDS and (now := percent()) > written:
            written, written_at = now, time.monotonic()
            progress(layers_step(list(fetched)), written)

    readers = {BESIDE: beside_the_layers(), **{layer.key: read_layer(layer) for layer in read}}
    queue = fetchers.pool().queue(stop)
    try:
        fetchers.drive(queue, readers, done, turn, STOP_CHECK_SECONDS)
    except BaseException:
        # The others' calls stop at their next check, or at once if waiting on one.
        stop.set()
        raise
    finally:
        queue.close()  # asks still waiting are dropped; on success there are none

    base = compose(**beside)
    progress(ANALYSING_STEP, 95)
    sources = describe_sources(provider, fetched, area)
    analysed = analyse(area, lang, fetched)
    for row in analysed["layers"]:
        if "mesh_classes" in row:  # the meshes read, drawn on the map as 250 m squares
            (dataset,) = fetched[row["key"]]
            ranks = {c["key"]: c["rank"] for c in row["legend"]}
            classes = row.pop("mesh_classes")
            row["maps"] = {
                dataset: maps.mesh_rects(zone_plan.outline.geometry.bounds, classes, ranks)
            }
        # A layer not read (not published here, or its terms forbid it) is neither real
        # nor demonstration data: it says nothing of the banner.
        if fetched.get(row["key"]):
            row["real"] = all(sources[ds].get("real") for ds in fetched[row["key"]])
        if row["key"] in fetched:
            row.update(draw_zones(row, rasters, zone_plan.outline.geometry.bounds))
            row.update(at_the_spot(row, fetched[row["key"]], spots, here, fetch))
        row["source"] = [
            {"dataset": ds, **{k: v for k, v in sources[ds].items() if k != "notes"}}
            for ds in fetched[row["key"]]
        ]
    if here:  # a point's headline is the spot's, now that each layer says what lies there
        analysed = describe(area, lang, analysed["layers"], spot=True)
    drawn = maps.map_outline(zone_plan.outline.geometry)
    bounds = zone_plan.outline.geometry.bounds

    def place(lat: float, lon: float) -> tuple[list[float], bool]:
        pin = maps.spot_xy(bounds, *here)  # type: ignore[misc]
        return sites.on_map(pin, maps.spot_xy(bounds, lat, lon), drawn["width"], drawn["height"])

    where = where_to_go(
        provider, area, here, analysed["layers"], fetch_sites, place, down=sites_down.is_set()
    )
    report = {
        "area": area.to_dict(),
        "extent": {**zone_plan.describe(), **drawn},
        "map": the_map(zone_plan.outline.geometry.bounds, base, here),
        "lang": lang,
        **analysed,
        "sources": sources,
        "provenance": provenance.describe(sources, area),
        **({"evacuation": where} if where else {}),
        "provider": provider.name,
        # The banner: shown while any layer still reads demonstration data.
        "demo": any(row.get("real") is False for row in analysed["layers"]),
        "cache": counter.as_dict(),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    progress("Report ready", 100)
    return report
