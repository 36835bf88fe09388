"""Brakes that count an attempt before the work they guard, and give it back if it did not count.

Flask-Limiter's `deduct_when` tests a limit before the view and counts after it has
answered: every request in flight when a slot frees passes the test, so eight guesses sent
at once all got their password checked where the brake allowed three. Here the attempt is
taken first, atomically (the storage's acquire: one statement under a per-key lock in
PostgreSQL, app/database/brakes.py), and the work runs only if every limit took it. What
turns out not to count (a log-in that succeeds) is given back afterwards.

A brake is (limits, scope, key): one or more limits ("10 per 15 minutes; 30 per day"),
the scope naming the brake, and the key it counts by (an address, an account, ...).
"""

import math
import time
from dataclasses import dataclass, field

from limits import RateLimitItem, parse_many
from limits.strategies import MovingWindowRateLimiter

from ..extensions import limiter


@dataclass
class Taken:
    """The attempts taken by a reservation, to give back; `wait`, if it was refused."""

    held: list[tuple[RateLimitItem, str, str]] = field(default_factory=list)
    wait: int = 0

    @property
    def refused(self) -> bool:
        return self.wait > 0


def take(*brakes: tuple[str, str, str]) -> Taken:
    """Count one attempt on every limit of every brake, or on none if any is full.

    When one refuses, those already taken are given back and `wait` says, in whole
    seconds (at least 1), when that one's window frees a slot.
    """
    taken = Taken()
    if not limiter.enabled:
        return taken
    strategy = limiter.limiter
    for limits, scope, key in brakes:
        for item in parse_many(limits):
            if strategy.hit(item, scope, key):
                taken.held.append((item, scope, key))
                continue
            give_back(taken)
            reset = strategy.get_window_stats(item, scope, key).reset_time
            # The window's exact end: rounding up to the next whole second could name a
            # wait one second longer than the window itself (901 s of a 15-minute one).
            taken.wait = min(max(1, math.ceil(reset - time.time())), item.get_expiry())
            return taken
    return taken


def give_back(taken: Taken) -> None:
    """Uncount the attempts taken, where the storage can (the default one can)."""
    storage = limiter.storage
    moving = isinstance(limiter.limiter, MovingWindowRateLimiter)
    release = getattr(storage, "release_entry" if moving else "decr", None)
    for item, scope, key in taken.held:
        if release is not None:
            if moving:
                release(item.key_for(scope, key), item.get_expiry())
            else:
                release(item.key_for(scope, key))
    taken.held.clear()
