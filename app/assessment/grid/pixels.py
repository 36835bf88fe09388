"""Where a zone tile's pixels are worked: a small process pool beside the worker.

A tile's pixel work is pure and CPU-bound: PNG bytes and a legend in, every pixel's class
out (classes_of), and the demo's painting is
the same (a tile key in, PNG bytes out). Run in a job's thread it holds the worker's GIL,
and the status poll of every other user waits behind it (issue 37: p99 1.4 s while eight
large cities were read). So it can run in ZONE_PROCESSES processes (default 0: in the
job's thread, for memory: see _settings), started on first use by the
process that runs jobs, never by gunicorn's master, with the 'forkserver' method (no
fork of a process that has threads). A job's thread waits for the answer with the GIL
released. The pool's queue is the bound on reports decoding at once: pixel work of any
number of jobs takes at most ZONE_PROCESSES cores, and the web worker keeps its own.

A pool that broke (a process killed) is replaced; the tile that saw it is worked in the
job's thread, so no job fails for it. The processes end with the worker's jobs:
Runner.shutdown calls shutdown() (gunicorn's worker_exit and the queue worker's exit both
come through it), and a process whose parent died finds its queue closed.

Palette PNGs (the portal's) are classified once per palette colour, through
tiles.classify and Pillow's own conversion of each colour, then indexed: the classes
that converting all 65,536 pixels to RGBA gives, for 256 colours' work.
"""

import io
import logging
import multiprocessing
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
from PIL import Image

from . import legends, locate, tiles

log = logging.getLogger(__name__)
T = TypeVar("T")

# In the job's thread unless ZONE_PROCESSES says otherwise: the pool's processes (a
# forkserver, its resource tracker and each worker, 40-50 MiB apiece) would take the
# whole process tree past issue 32's memory target (the worker alone is ~126 MiB).
_settings: dict[str, int] = {"processes": 0}
_lock = threading.Lock()
_pool: dict[str, Any] = {"executor": None, "pid": 0, "closed": 0}
# Tiles worked at once in this process's threads, whatever the number of jobs (see Turns).
DECODERS = 1


class Turns:
    """At most n threads at once in the pixel work, let in by the order they asked.

    The worker's GIL is one: every thread that works pixels is one more the status poll's
    thread waits behind each time it takes the GIL back after a read or a write (eight
    large cities read at once held the poll for seconds, issue 37). So a process works
    few tiles at once, in turn: first come, first served, so one job's many tiles cannot
    keep another's waiting. A thread that leaves hands its place to the first in line
    (a lock per waiter: one thread woken, where a condition's notify_all would wake every
    waiting tile of every job for each tile done, and a semaphore lets the thread that
    just left take its place again). A thread already in may go in again (a tile's
    decode, through call(), inside its tile's turn).
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self._lock = threading.Lock()
        self._queue: deque[threading.Lock] = deque()
        self._inside = 0
        self._mine = threading.local()

    @contextmanager
    def __call__(self) -> Iterator[None]:
        """Wait for this thread's turn, hold it for the block, then hand it on."""
        depth = getattr(self._mine, "depth", 0)
        if depth == 0:
            with self._lock:
                waiter = None
                if self._inside < self.n and not self._queue:
                    self._inside += 1
                else:
                    waiter = threading.Lock()
                    waiter.acquire()
                    self._queue.append(waiter)
            if waiter is not None:
                waiter.acquire()  # released by a thread leaving: its place is now this one's
        self._mine.depth = depth + 1
        try:
            yield
        finally:
            self._mine.depth = depth
            if depth == 0:
                with self._lock:
                    if self._queue and self._inside <= self.n:
                        self._queue.popleft().release()
                    else:
                        self._inside -= 1

    def resize(self, n: int) -> None:
        """Let n threads in at once from now on (those in line go in if there is room)."""
        with self._lock:
            self.n = n
            while self._queue and self._inside < n:
                self._queue.popleft().release()
                self._inside += 1


turn = Turns(DECODERS)
# A forked child has none of its parent's threads, so none of their places or waiters.
os.register_at_fork(after_in_child=lambda: turn.__init__(turn.n))


def configure(processes: int | None, decoders: int | None = None) -> None:
    """Set how many processes work pixels (ZONE_PROCESSES; None or 0: the job's thread).

    decoders (ZONE_DECODERS; None: DECODERS, or the pool's size if more): tiles worked at
    once, each in its turn (Turns); a tile in the pool holds its turn while it waits.
    """
    processes = processes or 0
    if processes < 0:
        raise ValueError("ZONE_PROCESSES must not be negative")
    decoders = max(DECODERS, processes) if decoders is None else decoders
    if decoders < 1:
        raise ValueError("ZONE_DECODERS must be at least 1")
    turn.resize(decoders)
    if processes != _settings["processes"]:
        shutdown()
        _settings["processes"] = processes
        # A new setting may start a pool again; the same one (the provider recheck makes a
        # provider every few minutes) never reopens a pool the stopping jobs closed.
        _pool["closed"] = 0


def processes() -> int:
    """Return how many processes work pixels (0: the job's thread does)."""
    return _settings["processes"]


def _executor() -> ProcessPoolExecutor | None:
    """Return this process's pool, started on first use; None once it was shut down."""
    with _lock:
        if _pool["closed"] == os.getpid():
            return None
        # A process forked from one that had a pool (a test, a queue worker) starts its own.
        if _pool["executor"] is None or _pool["pid"] != os.getpid():
            context = multiprocessing.get_context("forkserver")
            # Imported once, in the forkserver, and shared by every process it forks; not
            # __main__ (gunicorn's or flask's). Neither imports Flask nor the database.
            # The demo's painting (sources/portal.py) runs here too: preload it as well.
            context.set_forkserver_preload([__name__, "app.assessment.sources.portal"])
            _pool["executor"] = ProcessPoolExecutor(
                _settings["processes"], mp_context=context, initializer=_ignore_interrupts
            )
            _pool["pid"] = os.getpid()
        return _pool["executor"]


def _ignore_interrupts() -> None:
    """A pixel process ignores Ctrl-C, which reaches the terminal's whole group: the process
    that started it ends it (shutdown)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def shutdown() -> None:
    """Stop the pool and its processes now; later tiles are worked in the job's thread.

    Called when the process stops running jobs (Runner.shutdown): a job's thread still
    waiting gets BrokenProcessPool or RuntimeError and works its tile itself. The pool's
    processes, the forkserver and the resource tracker are ended and reaped here, not left
    to notice: multiprocessing's exit hook would wait for the pool's processes, and a
    process that leaves with os._exit would leave them behind.
    """
    with _lock:
        executor, _pool["executor"] = _pool["executor"], None
        mine = _pool["pid"] == os.getpid()
        _pool["closed"] = os.getpid()
    if executor is None or not mine:
        return
    children = list((executor._processes or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in children:
        process.terminate()
    for process in children:
        process.join(5)
    import multiprocessing
    from multiprocessing import forkserver, resource_tracker

    if multiprocessing.active_children():
        # Another process of this one's came from the same forkserver (the work's process,
        # app/jobs/offload.py): stopping the forkserver would wait for it for ever. The
        # forkserver and the tracker then end with this process, as they would anyway.
        return
    forkserver._forkserver._stop()
    if resource_tracker._resource_tracker._pid is not None:  # started by this process
        resource_tracker._resource_tracker._stop()


def call(fn: Callable[..., T], *args: Any) -> T:
    """Return fn(*args), worked in the pool (a pure function: the same answer either way).

    Without a pool, it is worked in this thread in its turn (Turns).
    """
    if _settings["processes"] == 0 or (executor := _executor()) is None:
        with turn():
            return fn(*args)
    try:
        return executor.submit(fn, *args).result()
    except BrokenProcessPool:
        with _lock:
            if _pool["executor"] is executor:
                _pool["executor"] = None  # the next tile starts a new pool
        log.warning("the pixel pool broke; this tile is worked in the job's thread")
    except (RuntimeError, CancelledError):  # shut down meanwhile (stopping): do it here
        pass
    with turn():
        return fn(*args)


def classes_of(png: bytes | None, legend: tuple[legends.ZoneClass, ...]) -> np.ndarray:
    """Return the class of every pixel of a tile, as tiles.decode does; palettes by colour."""
    if png is None:
        return tiles.decode(None, legend)
    with Image.open(io.BytesIO(png)) as image:
        if image.mode != "P":
            return tiles.decode(png, legend)
        indices = np.asarray(image)
        if indices.shape != (tiles.TILE_SIZE, tiles.TILE_SIZE):
            raise ValueError(f"a tile is {tiles.TILE_SIZE} pixels square, not {indices.shape}")
        palette = image.palette
        key = (palette.mode, palette.tobytes(), repr(image.info.get("transparency")), legend)
        table = _palettes.get(key)
        if table is None:
            # One row holding every palette index, converted by Pillow as the tile would
            # be (its palette and transparency come along with the crop).
            strip = image.crop((0, 0, 256, 1))
            strip.putdata(range(256))
            table = tiles.classify(np.asarray(strip.convert("RGBA")), legend)[0]
            if len(_palettes) >= PALETTES_KEPT:
                _palettes.pop(next(iter(_palettes)), None)
            _palettes[key] = table
    return table.take(indices)  # twice as quick as table[indices], the same


# A dataset's tiles share a palette or a few: each palette's classes are worked out once
# per process (a legend's worth of bytes each). Keyed by everything the conversion reads.
PALETTES_KEPT = 256
_palettes: dict[tuple, np.ndarray] = {}


class Unreadable(ValueError):
    """A tile's answer that Pillow cannot read as a PNG tile (args: its key)."""


def classes_over(
    pngs: list[tuple[str, bytes | None]],
    legend: tuple[legends.ZoneClass, ...],
    inside: np.ndarray | None,
) -> tuple[np.ndarray, bool, dict[str, int], dict[str, int]]:
    """Return a tile's classes from its PNGs (one per prefecture read), whether every one
    was missing (404: no zone mapped there), and, given inside, its unrecognised colours
    inside and those of them that are not a legend class's anti-aliased edge (stray)."""
    classes, missing, unknown, stray = None, True, {}, {}
    for key, png in pngs:
        try:
            found = classes_of(png, legend)
        except (OSError, ValueError) as exc:  # not a PNG tile Pillow can read
            raise Unreadable(key) from exc
        if png is not None and inside is not None and (found == -1).any():
            for colour, n in tiles.unknown_colours(png, found, inside).items():
                unknown[colour] = unknown.get(colour, 0) + n
            for colour, n in tiles.stray_colours(png, found, inside, legend).items():
                stray[colour] = stray.get(colour, 0) + n
        classes = found if classes is None else tiles.merge(classes, found, legend)
        missing = missing and png is None
    assert classes is not None, "a tile is read from one PNG at least"
    return classes, missing, unknown, stray


def work_tile(
    tile: Any,
    pngs: list[tuple[str, bytes | None]],
    legend: tuple[legends.ZoneClass, ...],
    packed: Any,
    factor: int,
    ranks: np.ndarray,
    here: tuple[float, float] | None,
) -> tuple[Any, bool, tuple[dict[str, int], dict[str, int]], np.ndarray, dict]:
    """Return all a report keeps of a tile: its counts, missing, colours (unknown, stray),
    its copy shrunk for the map and what lies nearest the spot (here). Bytes in, small
    answers out, so the whole of it can be worked in the pool, away from the worker's GIL;
    the mask crosses packed (zones.Masks.packed: a bool, or 8 KiB of bits)."""
    inside = tiles.unpack(packed)
    classes, missing, unknown, stray = classes_over(pngs, legend, inside)
    counted = tiles.count(classes, inside, len(legend))
    small = locate.shrink(classes, factor, ranks)
    found = locate.nearest(tile, classes, inside, *here) if here else {}
    return counted, missing, (unknown, stray), small, found


def unpublished(packed: Any, n: int, factor: int) -> tuple[Any, bool, tuple, np.ndarray, dict]:
    """Return what work_tile returns of a tile not published (every PNG a 404: no zone
    mapped there), without decoding: its pixels inside count as no zone. Cheap enough for
    the job's thread: such a tile never waits for a pixel turn nor crosses to the pool."""
    if isinstance(packed, bool):
        inside = tiles.TILE_SIZE**2 if packed else 0
    else:
        inside = int(np.bitwise_count(packed).sum())
    size = tiles.TILE_SIZE // factor
    return [0, inside] + [0] * n, True, ({}, {}), np.zeros((size, size), np.int8), {}


def class_at(
    pngs: list[tuple[str, bytes | None]], legend: tuple[legends.ZoneClass, ...], col: int, row: int
) -> Any:
    """Return the class of one pixel of a tile read from its PNGs (the spot's)."""
    classes, *_ = classes_over(pngs, legend, None)
    return locate.class_at(classes, col, row)
