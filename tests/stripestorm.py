"""Stripe's side of a storm: packs bought through the app, paid and refunded as buyers do.

Buyers buy packs through the app's checkout route (the app asks tests/fakestripe.py's
stand-in for the Checkout Session) and Stripe's deliveries follow for each session:
signed `checkout.session.completed`, `checkout.session.async_payment_succeeded` (paid
later, in either order with its unpaid `completed`), then what tests/stripeplans.py tells
of the payment: kept, refunded in full, in part or in several parts, a refund that fails
or is cancelled (`refund.failed`, `charge.refund.updated`), a dispute. Refunds come a few
seconds after the payment, some before it; buyers start with a modest balance and keep
running jobs, and the first is thrifty: it buys once it has about run out, and its
refunds wait until it has spent some of the pack, so they come after spending. The
events are posted to any web instance that answers; 30 % re-delivered later, some posted
to two instances at once, some of a payment's refund events all at once, some swapped
out of order, a few forged (a wrong secret, or a signature older than the 5 minutes
allowed). Like Stripe, an event is re-sent until it is answered 2xx, and a forged one
until it is answered at all (400). books() compares each session's ledger with its
story. A sale's choices come from the seed, its buyer and its number; the timing does not.

The events are constructed to the documented format (tests/fakestripe.py says from where).
"""

import collections
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import requests

from tests import fakestripe
from tests.stripeplans import REFUND_KINDS, Payment, tell

SECRET = "whsec_storm_constructed"
PACKS = {1: 500, 5: 2000}  # points: yen
CREDITING = ("checkout.session.completed", "checkout.session.async_payment_succeeded")
REFUNDED = "charge.refunded"
ACK_TIMEOUT = 120.0  # an event not acknowledged by then is a violation
FORGED_SECRET = "whsec_not_the_endpoints"
THRIFTY_WAIT = 120.0  # the longest a thrifty buyer waits to run out, or to spend


@dataclass
class Sale:
    """One Checkout Session, what the app acknowledged about it, and its story after."""

    session_id: str
    user_id: int
    points: int
    began: float  # wall clock, to find the faults around it
    ended: float = 0.0
    paid: bool = False  # a genuine paying event answered 2xx
    payment: Payment | None = None  # what Stripe did after the payment (None: never paid)
    plan: str = ""
    wrong: bool = False  # found wrong right after its events: not reported again
    thrifty: bool = False  # bought once the buyer had run out, refunded after spending

    @property
    def payment_intent(self) -> str:
        return f"pi_{self.session_id[-20:]}"


class Storm:
    """Buyers and Stripe's deliveries, until stop(); figures in .counts.

    web() lists the instances that answer; fault(text) records a violation; a buyer
    pauses about `pause` seconds between two sales; check(sale), if given, checks a sale's
    books once every event of it is acknowledged; balance(user id), if given, reads a
    buyer's balance, and makes the first buyer thrifty.
    """

    def __init__(
        self,
        web: Callable[[], list[str]],
        seed: int,
        fault,
        pause: float = 3.0,
        check: Callable[[Sale], None] | None = None,
        balance: Callable[[int], int] | None = None,
    ):
        self.web, self.seed, self.fault, self.pause = web, seed, fault, pause
        self.check, self.balance = check, balance
        self.secret, self.packs = SECRET, PACKS
        self.stripe = fakestripe.FakeStripe().start()
        # What the web instances need to sell through the stand-in and take its webhooks.
        self.env = {
            "POINT_PACKS": ",".join(f"{p}:{y}" for p, y in PACKS.items()),
            "STRIPE_SECRET_KEY": "sk_test_storm",
            "STRIPE_WEBHOOK_SECRET": SECRET,
            "STRIPE_API_BASE": self.stripe.url,
            "BUY_RATE_LIMIT": "100000 per minute",
            # Selling needs the seller named, and a test shop to sell beside demo reports.
            "SELLER_NAME": "株式会社ハザード",
            "SELLER_REPRESENTATIVE": "山田太郎",
            "SELLER_DISCLOSE_ON_REQUEST": "1",
            "SUPPORT_CONTACT": "help@hazard.example",
            "TEST_SHOP": "1",
        }
        self.sales: list[Sale] = []
        self.counts: collections.Counter[str] = collections.Counter()
        self.answers: collections.Counter[int] = collections.Counter()
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.route = random.Random()  # which instance a post goes to: not the schedule
        self.lock = threading.Lock()

    def start(self, buyers: list[tuple[requests.Session, str, int]]) -> None:
        """Start a buyer per (signed-in session, its CSRF token, user id)."""
        for n, buyer in enumerate(buyers):
            thread = threading.Thread(target=self.buyer, args=(n, *buyer), daemon=True)
            self.threads.append(thread)
            thread.start()

    def stop(self) -> None:
        """Stop buying; let every sale under way finish its deliveries."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(ACK_TIMEOUT * 4)

    def close(self) -> None:
        self.stripe.stop()

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] += n

    def url(self, prefer: int | None = None) -> str | None:
        urls = self.web()
        if not urls:
            return None
        return urls[prefer % len(urls)] if prefer is not None else self.route.choice(urls)

    def buyer(self, n: int, http: requests.Session, csrf: str, user_id: int) -> None:
        # The first buyer is thrifty (with balance given): it buys only once it has about
        # run out, and its refunds wait until it has spent some of the pack, so they come
        # after spending. The others buy at the storm's pace, for the deliveries' sake.
        thrifty = n == 0 and self.balance is not None
        number = 0
        while not self.stopping.is_set():
            rng = random.Random(f"{self.seed}-{n}-{number}")
            number += 1
            try:
                if thrifty:
                    self.until(lambda: self.balance(user_id) <= 1, THRIFTY_WAIT)
                if sale := self.buy(http, csrf, user_id, rng.choice(sorted(self.packs))):
                    sale.thrifty = thrifty
                    self.pay(sale, rng)
                    sale.ended = time.time()
                    if self.check:
                        self.check(sale)
            except Exception as exc:  # noqa: BLE001 - a buyer who gives up is a finding
                self.fault(f"buyer {n} stopped: {type(exc).__name__}: {exc}")
                return
            self.stopping.wait(rng.uniform(self.pause / 2, self.pause * 1.5))

    def until(self, done: Callable[[], bool], timeout: float) -> None:
        """Wait until done() or timeout seconds or the storm stops."""
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline and not self.stopping.wait(1.0):
            pass

    def buy(self, http: requests.Session, csrf: str, user_id: int, points: int) -> Sale | None:
        """Post the buy form until it sends the browser to Checkout; None if stopped first."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.stopping.is_set():
            url = self.url()
            try:
                r = url and http.post(
                    url + "/points/buy",
                    data={"points": points, "csrf_token": csrf},
                    allow_redirects=False,
                    timeout=30,
                )
            except requests.RequestException:
                r = None  # a dead instance: the session it may have made is never paid
            found = r is not None and re.search(
                r"/pay/(cs_test_\w+)", r.headers.get("Location", "")
            )
            if found:
                sale = Sale(found.group(1), user_id, points, time.time())
                with self.lock:
                    self.sales.append(sale)
                return sale
            if r is not None and r.status_code not in (303, 500, 502, 503):
                self.fault(f"user {user_id}: the buy form answered {r.status_code}")
                return None
            time.sleep(0.2)
        return None

    def pay(self, sale: Sale, rng: random.Random) -> None:
        """Play Stripe's events for one sale, as this sale's rng chooses them."""
        amount = self.packs[sale.points]
        pi, paid_at = sale.payment_intent, int(time.time())
        paid = fakestripe.completed_session(
            sale.session_id, sale.user_id, sale.points, amount, payment_intent=pi
        )
        events: list[tuple[str, dict, bool, int]] = []  # kind, object, genuine, created
        refunds: list[tuple[str, dict, bool, int]] = []
        if rng.random() < 0.03:  # only ever "paid" by a forger
            events = [("checkout.session.completed", paid, False, paid_at)]
        else:
            events = [("checkout.session.completed", paid, True, paid_at)]
            if rng.random() < 0.25:  # konbini: paid later, its two events in any order
                unpaid = {**paid, "payment_status": "unpaid"}
                events = [("checkout.session.completed", unpaid, True, paid_at - 60)]
                events.insert(rng.randrange(2), (CREDITING[1], paid, True, paid_at))
            sale.payment = tell(rng, pi, amount, paid_at)
            refunds = [(kind, obj, True, at) for kind, obj, at in sale.payment.events]
            if len(refunds) > 1 and rng.random() < 0.3:  # delivered out of Stripe's order
                n = rng.randrange(len(refunds) - 1)
                refunds[n], refunds[n + 1] = refunds[n + 1], refunds[n]
            if rng.random() < 0.05:
                forged = fakestripe.refunded_charge(pi, amount)
                refunds.insert(rng.randrange(len(refunds) + 1), (REFUNDED, forged, False, paid_at))
        first = bool(refunds) and rng.random() < 0.15
        if first:
            self.count("refunds before the payment")
        # One payload per event: a re-delivery is the same event, as Stripe re-sends it.
        events, refunds = (
            [(k, fakestripe.event(k, o, created=t), g, o) for k, o, g, t in batch]
            for batch in (events, refunds)
        )
        order = refunds + events if first else events + refunds
        sale.plan = " ".join(
            f"{k.rsplit('.', 1)[-1]}{'' if g else '(forged)'}" for k, _, g, _ in order
        )
        sale.plan += f" [{sale.payment.story}]" if sale.payment else ""
        later: list[tuple] = []
        for batch in (refunds, events) if first else (events, refunds):
            if batch is refunds and not first and refunds:
                time.sleep(rng.uniform(0.5, 4.0))  # the buyer spends meanwhile
                if sale.thrifty:  # until it has spent some of this pack
                    self.until(lambda: self.balance(sale.user_id) < sale.points, THRIFTY_WAIT)
            if batch is refunds and len(refunds) > 1 and rng.random() < 0.15:
                self.count("refund events posted at once", len(refunds))
                self.deliver_all(sale, refunds)
                later += [post for post in refunds if rng.random() < 0.3]
                continue
            for post in batch:
                self.deliver(sale, *post, copies=2 if rng.random() < 0.1 else 1)
                if rng.random() < 0.3:
                    later.append(post)
        rng.shuffle(later)
        for kind, payload, genuine, obj in later:
            self.count("re-deliveries")
            self.deliver(sale, kind, payload, genuine, obj)

    def deliver_all(self, sale: Sale, posts: list[tuple]) -> None:
        """Post several events at once, each until it is answered."""
        threads = [threading.Thread(target=self.post, args=(sale, *post)) for post in posts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def deliver(self, sale: Sale, kind: str, payload: bytes, genuine: bool, obj, copies=1):
        """Post one event (copies: at once, to different instances) until it is answered."""
        if copies > 1:
            self.count("concurrent duplicates")
            threads = [
                threading.Thread(target=self.post, args=(sale, kind, payload, genuine, obj, i))
                for i in range(copies)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        else:
            self.post(sale, kind, payload, genuine, obj)

    def post(self, sale: Sale, kind, payload: bytes, genuine: bool, obj, prefer=None) -> None:
        rng = random.Random()
        errors = 0
        deadline = time.monotonic() + ACK_TIMEOUT
        while time.monotonic() < deadline:
            if genuine:
                header = fakestripe.signature(payload, self.secret)
            elif rng.random() < 0.5:
                header = fakestripe.signature(payload, FORGED_SECRET)
            else:
                header = fakestripe.signature(payload, self.secret, int(time.time()) - 600)
            if (url := self.url(prefer)) is None:
                time.sleep(0.1)
                continue
            try:
                r = requests.post(
                    url + "/payments/stripe/webhook",
                    data=payload,
                    headers={"Content-Type": "application/json", "Stripe-Signature": header},
                    timeout=30,
                )
            except requests.RequestException:
                self.count("posts cut off (no answer)")  # the instance died: send again
                time.sleep(0.1)
                continue
            self.count("deliveries")
            self.count("forged deliveries" if not genuine else "genuine deliveries")
            if genuine and kind in REFUND_KINDS:
                self.count("refund events")
                self.count(f"refund events: {kind}")
            with self.lock:
                self.answers[r.status_code] += 1
            if r.status_code >= 500:
                errors += 1
                time.sleep(rng.uniform(0.1, 0.5))
                continue
            if errors:
                self.count("5xx answers retried to success", errors)
            if genuine and r.status_code == 200:
                if kind in CREDITING and obj.get("payment_status") == "paid":
                    sale.paid = True
            elif genuine or r.status_code != 400:
                self.fault(
                    f"session {sale.session_id}: {kind} {'signed' if genuine else 'forged'}"
                    f" answered {r.status_code}: {r.text[:200]}"
                )
            return
        self.count("5xx answers never retried to success", errors)
        self.fault(f"session {sale.session_id}: {kind} not answered in {ACK_TIMEOUT:.0f} s")

    def books(
        self, rows: list[tuple], incidents: list[tuple], sales: list[Sale] | None = None
    ) -> tuple[list[tuple[Sale | None, str]], set]:
        """Compare sales (all unless told) with the database; what is wrong, incidents explained.

        rows are (session, status, ledger kind, amount); incidents (id, payment_ref,
        detail), the open ones. A sale paid and kept holds its pack; refunded in full and
        unspent, nothing. Anything else (a part refunded, a refund after spending, a
        dispute, a refund that failed after support may have acted) the books cannot
        settle alone: a pack partly or wholly kept, or taken back, is right only with an
        open incident that names the sale (its session or payment) for support. Such
        incidents are explained; one naming a sale with no refund or dispute is not. A sale
        found wrong before is not reported again.
        """
        ledger: dict[str, list[tuple[str, int]]] = collections.defaultdict(list)
        status: dict[str, str] = {}
        for session_id, state, kind, amount in rows:
            status[session_id] = state
            if kind is not None:
                ledger[session_id].append((kind, amount))
        wrong: list[tuple[Sale | None, str]] = []
        known = {sale.session_id for sale in self.sales}
        for session_id in set(ledger) - known if sales is None else ():
            wrong.append((None, f"session {session_id}: never paid, ledger {ledger[session_id]}"))
        explained = set()
        for sale in self.sales if sales is None else sales:
            rows_of = ledger[sale.session_id]
            told = [i for i, ref, detail in incidents if sale.session_id[-20:] in f"{ref} {detail}"]
            kept = sum(n for _, n in rows_of)
            kinds = collections.Counter(kind for kind, _ in rows_of)
            fine = not rows_of and status.get(sale.session_id) != "paid"
            if sale.paid and sale.payment is not None:
                explained.update(told if sale.payment.story != "kept" else [])
                refunded, amount = sale.payment.refunded(), sale.payment.amount
                exact = not sale.payment.disputed and (
                    (refunded == 0 and kept == sale.points) or (refunded == amount and kept == 0)
                )
                fine = (
                    status.get(sale.session_id) == "paid"
                    and ("purchase", sale.points) in rows_of
                    and kinds["purchase"] == 1
                    and kinds["purchase_refund"] <= 1
                    and kinds["purchase_restore"] <= 1
                    and 0 <= kept <= sale.points
                    and (exact or bool(told))
                )
            if not fine and not sale.wrong:
                story = sale.payment.story if sale.payment else "never paid"
                money = sale.payment.refunded() if sale.payment else 0
                wrong.append(
                    (
                        sale,
                        f"session {sale.session_id} ({sale.plan}; paid {sale.paid}, {money} yen"
                        f" refunded, {story}): status {status.get(sale.session_id)}, ledger"
                        f" {rows_of}, {len(told)} open incidents name it",
                    )
                )
        return wrong, explained
