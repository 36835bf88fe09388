"""Zone tiles' pixel work in the pixel pool: the same answers as in the job's thread.

Tiles here are constructed: palette PNGs made by Pillow in the ways PNG allows a palette's
transparency to be written (a tRNS alpha per index, one transparent index, none), and the
demo's painted tiles.
"""

import contextlib
import io
import os
import signal
import threading
import time

import numpy as np
import pytest
from PIL import Image

from app.assessment import resolve_place
from app.assessment.grid import legends, locate, pixels, tiles, zones
from app.assessment.sources import portal
from app.assessment.sources.providers import make_provider
from app.assessment.work import run_assessment
from app.caches.singleflight import SingleFlightCache

FLOOD = legends.LEGENDS[portal.ZONE_DATASETS["flood_zones"]]


def palette_tile(transparency) -> bytes:
    """A palette tile: stripes of every flood colour, a blended edge colour, and index 0."""
    colours = [(0, 0, 0), *(zone.rgb for zone in FLOOD), (128, 128, 128), (250, 244, 170)]
    rows = np.arange(tiles.TILE_SIZE)[:, None] % len(colours)
    image = Image.fromarray(np.broadcast_to(rows, (256, 256)).astype(np.uint8), "P")
    image.putpalette([channel for rgb in colours for channel in rgb])
    out = io.BytesIO()
    image.save(out, "PNG", **({} if transparency is None else {"transparency": transparency}))
    return out.getvalue()


@pytest.mark.parametrize(
    "transparency",
    [None, 0, 3, bytes([0, 255, 100, 255, 127, 128, 255, 255, 0])],
    ids=["opaque", "index 0 clear", "index 3 clear", "alpha per index"],
)
def test_a_palette_tile_classifies_as_its_rgba_pixels_would(transparency):
    png = palette_tile(transparency)
    assert Image.open(io.BytesIO(png)).mode == "P"
    assert (pixels.classes_of(png, FLOOD) == tiles.decode(png, FLOOD)).all()


def test_the_demo_paints_palette_tiles_that_read_as_before():
    plan = zones.plan(resolve_place("浜松市"))
    painted = [p for p in map(lambda k: portal.paint("flood_zones", k), plan.keys) if p]
    assert painted and all(Image.open(io.BytesIO(p)).mode == "P" for p in painted)
    for png in painted[:8]:
        classes = pixels.classes_of(png, FLOOD)
        assert (classes == tiles.decode(png, FLOOD)).all()
        assert classes.max() > 0 and classes.min() >= 0  # painted, and nothing unrecognised


@pytest.mark.parametrize("factor", [1, 4])
def test_a_tile_not_published_reads_as_its_missing_pngs_decoded_would(factor):
    """A tile every PNG of which is missing (404) is counted, shrunk and searched from its
    mask alone, as decoding its PNGs would: the same counts, copy, dtype and nothing near."""
    plan = zones.plan(resolve_place("東京都中央区"))  # whole, partial and outside tiles
    ranks = np.array([-1, 0] + [zone.rank for zone in FLOOD], dtype=np.int16)
    here = (35.6700, 139.7720)
    cases = [(tile, plan.masks.packed(tile)) for tile in plan.tiles]
    cases.append((plan.tiles[0], False))
    assert {type(packed) for _, packed in cases} == {bool, np.ndarray}
    for tile, packed in cases:
        for pngs in ([("a", None)], [("a", None), ("b", None)]):
            decoded = pixels.work_tile(tile, pngs, FLOOD, packed, factor, ranks, here)
            alone = pixels.unpublished(packed, len(FLOOD), factor)
            assert alone[0] == list(decoded[0]) and alone[1:3] == decoded[1:3]
            assert alone[3].dtype == decoded[3].dtype and (alone[3] == decoded[3]).all()
            assert alone[4] == decoded[4] == {}


@pytest.fixture
def pool():
    pixels.configure(1)
    yield
    pixels.shutdown()
    pixels.configure(None)


def test_the_pool_works_elsewhere_and_answers_as_the_thread(pool):
    assert pixels.call(os.getpid) != os.getpid()  # another process did it
    plan = zones.plan(resolve_place("東京都中央区"))
    for tile in plan.tiles[:6]:
        png = portal.paint("flood_zones", tiles.tile_key(tile))
        there = pixels.call(pixels.classes_of, png, FLOOD)
        assert (there == pixels.classes_of(png, FLOOD)).all()


def test_a_broken_pool_is_replaced_and_the_tile_still_read(pool):
    first = pixels.call(os.getpid)
    os.kill(first, signal.SIGKILL)
    time.sleep(0.2)
    assert pixels.call(os.getpid) == os.getpid()  # this tile: in the thread, not lost
    assert pixels.call(os.getpid) not in (first, os.getpid())  # by a new pool after that


def test_a_report_is_the_same_in_the_pool_and_in_the_thread(pool):
    area = resolve_place("35.6812, 139.7671")

    def report(processes: int) -> dict:
        pixels.configure(processes)
        answer = run_assessment(
            area,
            "en",
            provider=make_provider({"LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": 0}),
            cache=SingleFlightCache(maxsize=4096),
            progress=lambda step, percent: None,
        )
        return {k: v for k, v in answer.items() if k not in ("generated_at", "cache", "provider")}

    assert report(1) == report(0)


def wait_until(predicate, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_turns_let_n_in_at_once_in_the_order_they_asked():
    turns = pixels.Turns(1)
    entered: list[int] = []
    holding = threading.Event()
    release = threading.Event()

    def first() -> None:
        with turns():
            holding.set()
            release.wait(5)

    def later(i: int) -> None:
        with turns():
            entered.append(i)

    threads = [threading.Thread(target=first)]
    threads[0].start()
    holding.wait(5)
    for i in range(8):  # each in line before the next asks
        threads.append(threading.Thread(target=later, args=(i,)))
        threads[-1].start()
        wait_until(lambda i=i: len(turns._queue) == i + 1)
    assert entered == []  # nobody passes the one inside
    release.set()
    for thread in threads:
        thread.join(5)
    assert entered == list(range(8))
    assert turns._inside == 0 and not turns._queue


def test_turns_never_let_more_than_n_in_and_give_a_place_back_on_an_error():
    turns, inside, most = pixels.Turns(2), [0], [0]
    lock = threading.Lock()

    def work(i: int) -> None:
        with contextlib.suppress(ZeroDivisionError), turns():
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.002)
            with turns():  # the same thread goes in again without a place of its own
                pass
            with lock:
                inside[0] -= 1
            if i % 3 == 0:
                raise ZeroDivisionError

    threads = [threading.Thread(target=work, args=(i,)) for i in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert most[0] == 2
    assert turns._inside == 0 and not turns._queue


def test_a_grown_turns_lets_those_in_line_in():
    turns, inside = pixels.Turns(1), threading.Semaphore(0)
    release = threading.Event()

    def hold() -> None:
        with turns():
            inside.release()
            release.wait(5)

    threads = [threading.Thread(target=hold) for _ in range(3)]
    for thread in threads:
        thread.start()
    assert inside.acquire(timeout=5) and not inside.acquire(timeout=0.1)
    turns.resize(3)
    assert inside.acquire(timeout=5) and inside.acquire(timeout=5)
    release.set()
    for thread in threads:
        thread.join(5)
    assert turns._inside == 0


@pytest.mark.parametrize("decoders", [1, 2])
def test_a_reports_pixel_work_is_done_by_at_most_the_decoders_at_once(monkeypatch, decoders):
    """However many reports read tiles at once, at most ZONE_DECODERS are worked at once."""
    active, most, calls = [0], [0], [0]
    lock = threading.Lock()

    def counted(fn):
        def inner(*args):
            with lock:
                active[0] += 1
                calls[0] += 1
                most[0] = max(most[0], active[0])
            try:
                time.sleep(0.001)  # long enough for the other job's thread to come in too
                return fn(*args)
            finally:
                with lock:
                    active[0] -= 1

        return inner

    monkeypatch.setattr(pixels, "classes_of", counted(pixels.classes_of))
    monkeypatch.setattr(tiles, "count", counted(tiles.count))
    monkeypatch.setattr(locate, "shrink", counted(locate.shrink))
    provider = make_provider(
        {"LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": 0, "ZONE_DECODERS": decoders}
    )
    errors = []

    def report(place: str) -> None:
        try:
            run_assessment(
                resolve_place(place),
                "en",
                provider=provider,
                cache=SingleFlightCache(maxsize=4096),
                progress=lambda step, percent: None,
            )
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    # Two reports at once: a report works its own tiles one at a time, in its own thread.
    jobs = [threading.Thread(target=report, args=(p,)) for p in ("東京都中央区", "東京都港区")]
    try:
        for job in jobs:
            job.start()
        for job in jobs:
            job.join(60)
    finally:
        pixels.configure(None)
    assert not errors and not any(job.is_alive() for job in jobs)
    assert calls[0] > 2 * 3 * 5 * 4  # every dataset's tiles went through, three parts each
    assert most[0] == decoders


def test_a_forked_child_starts_with_its_turns_free():
    """A thread of the parent held a place when it forked; the child has no such thread."""
    release = threading.Event()
    held = threading.Event()

    def hold() -> None:
        with pixels.turn():
            held.set()
            release.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(5)
    try:
        pid = os.fork()
        if pid == 0:  # the child: a turn of its own at once, or a timeout kill
            signal.alarm(5)
            with pixels.turn():
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    finally:
        release.set()
        thread.join(5)


def test_a_job_stopped_while_its_tiles_wait_in_line_works_none_of_them(monkeypatch):
    worked = []
    monkeypatch.setattr(pixels, "classes_of", lambda *args: worked.append(1) or np.zeros(1))
    stop, release, held, failed = threading.Event(), threading.Event(), threading.Event(), []

    def hold() -> None:  # another job's tile, in its turn while this job's tiles line up
        with pixels.turn():
            held.set()
            release.wait(10)

    def job() -> None:
        try:
            run_assessment(
                resolve_place("東京都中央区"),
                "en",
                provider=make_provider({"LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": 0}),
                cache=SingleFlightCache(maxsize=4096),
                progress=lambda step, percent: None,
                stop=stop,
            )
        except Exception as exc:  # noqa: BLE001 - what the job ended with
            failed.append(exc)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    runner = threading.Thread(target=job)
    runner.start()
    wait_until(lambda: len(pixels.turn._queue) >= 4)  # the job's tiles, waiting their turn
    stop.set()
    runner.join(5)
    release.set()
    holder.join(5)
    wait_until(lambda: not pixels.turn._queue and pixels.turn._inside == 0)
    assert worked == [] and [type(exc).__name__ for exc in failed] == ["Stopped"]


def test_a_places_masks_are_kept_with_its_plan_for_its_next_report(monkeypatch):
    made, real = [], tiles.inside_mask
    monkeypatch.setattr(tiles, "inside_mask", lambda *a: made.append(a[0]) or real(*a))
    zones._plan.cache_clear()
    provider = make_provider({"LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": 0})

    def report() -> dict:
        return run_assessment(
            resolve_place("東京都中央区"),
            "en",
            provider=provider,
            cache=SingleFlightCache(maxsize=4096),
            progress=lambda step, percent: None,
        )

    first = report()
    once = len(made)
    second = report()
    zones._plan.cache_clear()
    assert once == len(set(made)) > 0  # each tile's mask made once, for all the layers
    assert len(made) == once  # the second report of the place made none
    assert first["layers"] == second["layers"]


def test_the_pool_ends_without_waiting_on_another_process_of_its_forkserver():
    """A process whose forkserver also started the work's process (offload.py) ended its
    pool by stopping the forkserver, which waits for every process it forked: for ever."""
    import multiprocessing
    import threading
    import time
    from multiprocessing import forkserver

    pixels.configure(1)
    assert pixels.call(os.getpid) != os.getpid()  # the pool and its forkserver are up
    other = multiprocessing.get_context("forkserver").Process(target=time.sleep, args=(60,))
    other.start()
    try:
        ending = threading.Thread(target=pixels.shutdown, daemon=True)
        ending.start()
        ending.join(30)
        assert not ending.is_alive(), "the pool's end waited on the other process"
    finally:
        other.terminate()
        other.join(10)
        pixels.configure(None)
        forkserver._forkserver._stop()  # nothing else of this process holds it now
