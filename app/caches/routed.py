"""Two caches behind one: map tiles (long-lived, few a year change) and the rest.

A job asks one cache for every upstream key; keys whose dataset is a tile dataset go to
the tile cache (a long TTL, fewer entries: a tile weighs kilobytes), the others to the
layer cache. Both keep their single-flight and shared behaviour.
"""

from collections.abc import Callable, Collection, Hashable
from typing import Any, TypeVar

from .singleflight import CacheStats

V = TypeVar("V")


class RoutedCache:
    """Send (dataset, key) lookups to the tile cache or the layer cache by dataset."""

    def __init__(self, layers: Any, tiles: Any, tile_datasets: Collection[str]) -> None:
        self.layers = layers
        self.tiles = tiles
        self.tile_datasets = frozenset(tile_datasets)

    def get(self, key: Hashable, factory: Callable[[], V], counter: CacheStats | None = None) -> V:
        """Return the value for key from the cache its dataset belongs to."""
        dataset = key[0] if isinstance(key, tuple) and key else None
        cache = self.tiles if dataset in self.tile_datasets else self.layers
        return cache.get(key, factory, counter)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.layers, name)  # stats, clear, ... of the layer cache
