"""What Stripe does to one paid Checkout Session in a storm, after the payment, as buyers do.

Most payments are kept; the others are refunded the ways support and buyers make it
happen: in full, in part, in two parts, in part and then the rest; a konbini refund waits
for the buyer's bank details and then fails or is cancelled (`refund.failed`, or
`charge.refund.updated` with status failed or canceled, after one saying it waits), alone
or beside a refund that went through; or the buyer's bank disputes the charge
(`charge.dispute.created`). Each happening is one event at a Stripe time of its own, a
few seconds apart, carrying the objects Stripe documents (tests/fakestripe.py): a
charge.refunded's Charge says how much of it stands refunded then, failed refunds no
longer counted. A payment's story is a pure function of its rng, so each kind is tested
without a server; tests/stripestorm.py delivers the events re-delivered, concurrently and
out of order, and checks the books against Payment.refunded() and Payment.disputed.
"""

import random
from dataclasses import dataclass, field

from tests import fakestripe

REFUND_KINDS = (
    "charge.refunded",
    "refund.failed",
    "charge.refund.updated",
    "charge.dispute.created",
)
# How often each story is told of a paid session (weights; "kept" is no refund at all).
STORIES = {
    "kept": 50,
    "full": 14,
    "partial": 6,
    "two partials": 5,
    "partial then the rest": 5,
    "full, fails": 8,
    "partial, fails": 4,
    "one of two fails": 4,
    "disputed": 4,
}
STEP = 5  # seconds of Stripe's clock between two happenings


@dataclass
class Refund:
    """One Refund of a payment: its id, its yen, and how it ended if it did not go through."""

    id: str
    amount: int
    created: int  # Stripe's time the Refund was made: its charge.refunded's, never later
    undone: str = ""  # "" (it went through), "failed" or "canceled"


@dataclass
class Payment:
    """A paid session's story after the payment, and its events in Stripe's order."""

    story: str
    amount: int
    refunds: list[Refund] = field(default_factory=list)
    disputed: bool = False
    events: list[tuple[str, dict, int]] = field(default_factory=list)  # kind, object, created

    def refunded(self) -> int:
        """The yen that went back to the buyer and stayed there."""
        return sum(r.amount for r in self.refunds if not r.undone)


def tell(rng: random.Random, payment_intent: str, amount: int, paid_at: int) -> Payment:
    """Choose a story for a payment of `amount` yen made at `paid_at`, and build its events."""
    story = rng.choices(list(STORIES), weights=list(STORIES.values()))[0]
    payment = Payment(story, amount)
    charge_id = f"ch_{payment_intent[-20:]}"
    clock = paid_at
    standing = 0  # what the charge says is refunded now

    def part(below: int) -> int:  # a part of what is left, in whole hundreds of yen
        return 100 * rng.randrange(1, max(2, below // 100))

    def refund(yen: int, undone: str = "") -> Refund:
        nonlocal clock, standing
        clock += STEP
        standing += yen
        made = Refund(f"re_{payment_intent[-16:]}{len(payment.refunds)}", yen, clock, undone)
        payment.refunds.append(made)
        obj = fakestripe.refunded_charge(
            payment_intent, amount, refunded_amount=standing, charge_id=charge_id
        )
        payment.events.append(("charge.refunded", obj, clock))
        return made

    def undo(made: Refund) -> None:
        nonlocal clock, standing
        clock += STEP
        standing -= made.amount
        if rng.random() < 0.5:  # Stripe tells of the wait first, then of the end
            waiting = fakestripe.refund(
                payment_intent, made.amount, "requires_action", refund_id=made.id,
                created=made.created,
            )  # fmt: skip
            payment.events.append(("charge.refund.updated", waiting, clock))
            clock += STEP
        # The Refund says when it was made, not when it ended (its event says that).
        obj = fakestripe.refund(
            payment_intent, made.amount, made.undone, refund_id=made.id, created=made.created
        )
        kind = "refund.failed" if made.undone == "failed" and rng.random() < 0.5 else None
        payment.events.append((kind or "charge.refund.updated", obj, clock))

    fails = rng.choice(("failed", "canceled"))
    if story == "full":
        refund(amount)
    elif story == "partial":
        refund(part(amount))
    elif story == "two partials":
        first = part(amount - 100)
        refund(first)
        refund(part(amount - first))
    elif story == "partial then the rest":
        first = part(amount)
        refund(first)
        refund(amount - first)
    elif story == "full, fails":
        undo(refund(amount, fails))
    elif story == "partial, fails":
        undo(refund(part(amount), fails))
    elif story == "one of two fails":
        first = refund(part(amount), fails)
        refund(amount - first.amount)
        undo(first)
    elif story == "disputed":
        payment.disputed = True
        clock += STEP
        obj = {**fakestripe.dispute(payment_intent, amount), "created": clock}
        payment.events.append(("charge.dispute.created", obj, clock))
    return payment
