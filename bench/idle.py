"""BENCH_IDLE_PLACE's sleeping jobs (bench/benchapp.py): their fetches wait until stopped.

Where a report's work runs in the work's process (WORK_PROCESS), that process is built by
setup() below instead of app.assessment.hosted.setup, so the jobs sleep there too.
"""

import threading
from collections.abc import Callable, Collection
from typing import Any


def pause(provider: Any, idle: Collection[str]) -> None:
    """Make the provider's fetch of an idle key wait for the job's stop, then raise Stopped."""
    from app.assessment.errors import Stopped

    fetch = provider.fetch

    def wait_or_fetch(dataset, key, stop=None, **options):
        if key not in idle:
            return fetch(dataset, key, stop=stop, **options)
        (stop or threading.Event()).wait(3600)
        raise Stopped()

    provider.fetch = wait_or_fetch


def setup(config: dict[str, Any]) -> Callable[..., dict[str, Any]]:
    """The work's process of the bench: the product's, every provider paused on the keys."""
    from app.assessment import hosted
    from app.assessment.sources import providers

    idle, made = frozenset(config["BENCH_IDLE_KEYS"]), providers.make_provider

    def make(settings: dict[str, Any]) -> Any:
        provider = made(settings)
        pause(provider, idle)
        return provider

    providers.make_provider = make  # hosted.setup imports it when called, below
    return hosted.setup(config)
