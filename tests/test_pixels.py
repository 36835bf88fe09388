"""Zone tiles' pixel work in the pixel pool: the same answers as in the job's thread.

Tiles here are constructed: palette PNGs made by Pillow in the ways PNG allows a palette's
transparency to be written (a tRNS alpha per index, one transparent index, none), and the
demo's painted tiles.
"""

import io
import os
import signal
import time

import numpy as np
import pytest
from PIL import Image

from app.assessment import resolve_place
from app.assessment.grid import pixels, tiles, zones
from app.assessment.sources import portal
from app.assessment.sources.providers import make_provider
from app.assessment.work import run_assessment
from app.caches.singleflight import SingleFlightCache

FLOOD = tiles.LEGENDS[portal.ZONE_DATASETS["flood_zones"]]


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
