"""Stripe's side of a storm: packs bought through the app, webhooks delivered as badly as allowed.

Buyers buy packs through the app's checkout route (the app asks tests/fakestripe.py's
stand-in for the Checkout Session) and Stripe's deliveries follow for each session:
signed `checkout.session.completed`, `checkout.session.async_payment_succeeded` (paid
later, in either order with its unpaid `completed`) and `charge.refunded` events, posted
to any web instance that answers; 30 % re-delivered later, some posted to two instances at
once, some refunds sent before the payment, a few forged (a wrong secret, or a signature
older than the 5 minutes allowed). Like Stripe, an event is re-sent until it is answered
2xx, and a forged one until it is answered at all (400). What each session should hold
follows from what was acknowledged; books() compares that with the ledger. A sale's
choices come from the seed, its buyer and its number; the timing does not.

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

SECRET = "whsec_storm_constructed"
PACKS = {1: 500, 5: 2000}  # points: yen
CREDITING = ("checkout.session.completed", "checkout.session.async_payment_succeeded")
ACK_TIMEOUT = 120.0  # an event not acknowledged by then is a violation
FORGED_SECRET = "whsec_not_the_endpoints"


@dataclass
class Sale:
    """One Checkout Session, and what the app acknowledged about it."""

    session_id: str
    user_id: int
    points: int
    began: float  # wall clock, to find the faults around it
    ended: float = 0.0
    paid: bool = False  # a genuine paying event answered 2xx
    refunded: bool = False  # a genuine charge.refunded answered 2xx
    plan: str = ""


class Storm:
    """Buyers and Stripe's deliveries, until stop(); figures in .counts.

    web() lists the instances that answer; fault(text) records a violation; a buyer
    pauses about `pause` seconds between two sales.
    """

    def __init__(self, web: Callable[[], list[str]], seed: int, fault, pause: float = 3.0):
        self.web, self.seed, self.fault, self.pause = web, seed, fault, pause
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
        number = 0
        while not self.stopping.is_set():
            rng = random.Random(f"{self.seed}-{n}-{number}")
            number += 1
            try:
                if sale := self.buy(http, csrf, user_id, rng.choice(sorted(self.packs))):
                    self.pay(sale, rng)
                    sale.ended = time.time()
            except Exception as exc:  # noqa: BLE001 - a buyer who gives up is a finding
                self.fault(f"buyer {n} stopped: {type(exc).__name__}: {exc}")
                return
            self.stopping.wait(rng.uniform(self.pause / 2, self.pause * 1.5))

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
        pi = f"pi_{sale.session_id[-20:]}"
        paid = fakestripe.completed_session(
            sale.session_id, sale.user_id, sale.points, amount, payment_intent=pi
        )
        refund = fakestripe.refunded_charge(pi, amount)
        events: list[tuple[str, dict, bool]] = []
        if rng.random() < 0.03:  # only ever "paid" by a forger
            events = [("checkout.session.completed", paid, False)]
        else:
            events = [("checkout.session.completed", paid, True)]
            if rng.random() < 0.25:  # konbini: paid later, its two events in any order
                unpaid = {**paid, "payment_status": "unpaid"}
                events = [("checkout.session.completed", unpaid, True)]
                events.insert(rng.randrange(2), (CREDITING[1], paid, True))
            if rng.random() < 0.3:
                first = rng.random() < 0.3
                self.count("refunds before the payment" if first else "refunds")
                events.insert(0 if first else len(events), ("charge.refunded", refund, True))
            if rng.random() < 0.05:
                place = rng.randrange(len(events) + 1)
                events.insert(place, ("charge.refunded", refund, False))
        sale.plan = " ".join(
            f"{k.rsplit('.', 1)[-1]}{'' if g else '(forged)'}" for k, _, g in events
        )
        later: list[tuple] = []
        for kind, obj, genuine in events:
            payload = fakestripe.event(kind, obj)
            self.deliver(sale, kind, payload, genuine, obj, copies=2 if rng.random() < 0.1 else 1)
            if rng.random() < 0.3:
                later.append((kind, payload, genuine, obj))
        rng.shuffle(later)
        for kind, payload, genuine, obj in later:
            self.count("re-deliveries")
            self.deliver(sale, kind, payload, genuine, obj)

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
            with self.lock:
                self.answers[r.status_code] += 1
            if r.status_code >= 500:
                errors += 1
                time.sleep(rng.uniform(0.1, 0.5))
                continue
            if errors:
                self.count("5xx answers retried to success", errors)
            if genuine and r.status_code == 200:
                if kind == "charge.refunded":
                    sale.refunded = True
                elif kind in CREDITING and obj.get("payment_status") == "paid":
                    sale.paid = True
            elif genuine or r.status_code != 400:
                self.fault(
                    f"session {sale.session_id}: {kind} {'signed' if genuine else 'forged'}"
                    f" answered {r.status_code}: {r.text[:200]}"
                )
            return
        self.count("5xx answers never retried to success", errors)
        self.fault(f"session {sale.session_id}: {kind} not answered in {ACK_TIMEOUT:.0f} s")

    def net(self) -> collections.Counter[int]:
        """Points each user should hold from purchases: credited less reversed."""
        net: collections.Counter[int] = collections.Counter()
        for sale in self.sales:
            if sale.paid:
                net[sale.user_id] += 0 if sale.refunded else sale.points
        return net

    def books(self, rows: list[tuple]) -> list[tuple[Sale | None, str]]:
        """Compare each sale with rows (session, status, kind, amount) of the database."""
        ledger: dict[str, list[tuple[str, int]]] = collections.defaultdict(list)
        status: dict[str, str] = {}
        for session_id, state, kind, amount in rows:
            status[session_id] = state
            if kind is not None:
                ledger[session_id].append((kind, amount))
        wrong = []
        known = {sale.session_id for sale in self.sales}
        for session_id in set(ledger) - known:
            wrong.append((None, f"session {session_id}: never paid, ledger {ledger[session_id]}"))
        for sale in self.sales:
            want = [("purchase", sale.points)] if sale.paid else []
            if sale.paid and sale.refunded:
                want.append(("purchase_refund", -sale.points))
            state = status.get(sale.session_id)
            if sorted(ledger[sale.session_id]) != sorted(want) or (state == "paid") != sale.paid:
                wrong.append(
                    (
                        sale,
                        f"session {sale.session_id} ({sale.plan}; paid {sale.paid}, refunded"
                        f" {sale.refunded}): status {state}, ledger {ledger[sale.session_id]}",
                    )
                )
        return wrong
