"""Property-based: any interleaving of a job's transitions keeps the ledger and the page honest.

A Hypothesis state machine drives real transitions (start, heartbeat, succeed, fail,
reap, finalize, shutdown, the support console's settlement) on the real PostgreSQL, in
random order on a few users and jobs, and checks the invariants after every step: the
balance is the ledger's sum and never negative, each job is charged and refunded at
most once and only by its own rows, and what the status fragment would say about a
point never contradicts the ledger. A `race` step runs two transitions on one job from
two real threads. Each example makes its own users rather than truncating the tables (a
TRUNCATE cost ~150 ms an example); the invariants look at that example's users, and the
auditor (`flask ledger-check`) at everything, once, at the end.
"""

import functools
import threading
import time
import uuid

import psycopg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from app.extensions import db
from app.jobs import transitions, views
from app.operations import failpoints
from app.points import billing, ledger
from app.points.billing import Billing

USERS = 3
SETTINGS = settings(
    max_examples=50,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Per job of the example's users: its status and what its ledger rows and incidents say.
FACTS_SQL = """
SELECT j.id, j.user_id, j.status, j.finalized_at IS NOT NULL AS finalized,
  (SELECT count(*) FROM point_ledger c WHERE c.job_id = j.id AND c.kind = 'consume') AS consumes,
  (SELECT count(*) FROM point_ledger r WHERE r.job_id = j.id AND r.kind = 'refund') AS refunds,
  (SELECT count(*) FROM point_ledger r JOIN point_ledger c ON c.id = r.refund_of
    WHERE r.job_id = j.id AND r.kind = 'refund' AND c.kind = 'consume'
      AND c.job_id = j.id AND c.user_id = r.user_id) AS own_refunds,
  EXISTS (SELECT 1 FROM incidents i WHERE i.job_id = j.id AND i.resolved_at IS NULL) AS open,
  EXISTS (SELECT 1 FROM incidents i WHERE i.job_id = j.id AND i.resolved_by IS NOT NULL)
    AS by_support
FROM assessment_jobs j WHERE j.user_id = ANY(%(users)s) ORDER BY j.created_at
"""


def on_a_job(step):
    """Run a rule only on a job that exists (submit put None in the bundle for no job)."""

    @functools.wraps(step)
    def run(self, job, **kwargs):
        if job is not None:
            return step(self, job, **kwargs)

    return run


class Ledger(RuleBasedStateMachine):
    """Jobs of a few users, moved by the app's own transitions in any order."""

    jobs = Bundle("jobs")

    def __init__(self, app, database_url, impatient=None):
        super().__init__()
        self.app = app
        self.impatient = impatient  # a reaper whose lease has run out for every job
        self.db = psycopg.connect(database_url, autocommit=True)
        self.ctx = app.app_context()
        self.ctx.push()
        self.owner: dict[uuid.UUID, int] = {}

    def teardown(self):
        failpoints.configure("")
        db.session.rollback()
        self.ctx.pop()  # returns the session's connection to the pool
        self.db.close()

    def run_of(self, job):
        """Return the one run that starts and finishes a job (its thread or its task)."""
        return uuid.uuid5(uuid.NAMESPACE_URL, str(job))

    def q(self, statement, **params):
        cur = self.db.execute(statement, params)
        return cur.fetchall() if cur.description else cur.rowcount

    @initialize(points=st.lists(st.integers(0, 3), min_size=USERS, max_size=USERS))
    def users(self, points):
        # Raw rows, not accounts.create_user: hashing a password per example is slow.
        self.user_ids = []
        for n, amount in enumerate(points):
            user_id = self.q(
                "INSERT INTO users (email, password_hash) VALUES (%(e)s, 'x') RETURNING id",
                e=f"u{n}-{uuid.uuid4().hex[:12]}@example.com",
            )[0][0]
            if amount:
                ledger.grant(user_id, amount, "welcome points")
            self.user_ids.append(user_id)
        self.support_id = self.q(
            "INSERT INTO users (email, password_hash, role)"
            " VALUES (%(e)s, 'x', 'support') RETURNING id",
            e=f"help-{uuid.uuid4().hex[:12]}@example.com",
        )[0][0]
        db.session.commit()

    @rule(target=jobs, user=st.integers(0, USERS - 1), started=st.booleans())
    def submit(self, user, started):
        user_id = self.user_ids[user]
        try:
            job_id = transitions.create(user_id, "札幌市", "en", None, generation=0)
        except (transitions.NotEnoughPoints, transitions.AssessmentInFlight):
            # Whether the user had a point or a job in flight can depend on how an earlier
            # race ended; the bundle must grow the same way whatever it was, or Hypothesis
            # cannot replay the example. None stands for "no job", and every rule skips it.
            return None
        self.owner[job_id] = user_id
        if started:  # its thread started it at once, as it mostly does
            self.start(job_id)
        return job_id

    @rule(job=jobs)
    @on_a_job
    def start(self, job):
        try:
            transitions.start(job, self.run_of(job))
        except ledger.InsufficientPoints:  # as the job thread does
            transitions.fail_and_settle(job, "NO_POINTS", "no point left")

    @rule(job=jobs)
    @on_a_job
    def heartbeat(self, job):
        transitions.heartbeat([job])

    @rule(job=jobs)
    @on_a_job
    def succeed(self, job):
        transitions.succeed(job, {"layers": []}, self.run_of(job), "Done.")

    @rule(job=jobs)
    @on_a_job
    def fail(self, job):
        transitions.fail_and_settle(job, "INTERNAL_ERROR", "The assessment failed.")

    @rule(job=jobs)
    @on_a_job
    def shutdown(self, job):
        transitions.fail_and_settle(job, transitions.INTERRUPTED, "The service restarted.")

    @rule(job=jobs)
    @on_a_job
    def crash_before_settling(self, job):
        # Failed, then the process died before the finalizer: a later poll settles it.
        transitions.fail(job, transitions.INTERRUPTED, "The service restarted.")

    @rule(job=jobs)
    @on_a_job
    def reap(self, job):
        self.make_stale(job)
        transitions.reap(job)

    @rule(job=jobs)
    @on_a_job
    def finalize(self, job):
        billing.finalize(job, self.owner[job])

    @rule(job=jobs)
    @on_a_job
    def finalize_without_ledger(self, job):
        # The consume lookup fails: a failed, unfinalized job goes to support. Only on
        # this thread: a finalizer racing it on another thread reads the ledger.
        with failpoints.on_this_thread("consume_lookup=raise"):
            billing.finalize(job, self.owner[job])

    @rule(job=jobs, refund=st.booleans())
    @on_a_job
    def support_settles(self, job, refund):
        for (incident_id,) in self.q(
            "SELECT id FROM incidents WHERE job_id = %(j)s AND resolved_at IS NULL", j=job
        ):
            billing.settle_by_support(incident_id, job, self.support_id, refund, "checked")

    @rule(job=jobs)
    @on_a_job
    def poll(self, job):
        shown = views.view(job, self.owner[job]).billing
        db.session.rollback()
        _, _, status, finalized, consumes_, refunds, _, open_, _ = self.facts(job)
        self.check_shown(shown, status, finalized, consumes_, refunds, open_)

    @rule(job=consumes(jobs))
    @on_a_job
    def forget(self, job):
        """Stop touching a job, so later steps reach the others more often."""

    @rule(
        job=jobs,
        pair=st.sampled_from(
            [
                ("succeed", "reap"),
                ("succeed", "shutdown"),
                ("reap", "shutdown"),
                ("fail", "reap"),
                ("start", "reap"),
                ("finalize", "finalize"),
                ("finalize_without_ledger", "finalize"),
                ("finalize", "poll"),
            ]
        ),
    )
    @on_a_job
    def race(self, job, pair):
        """Run two transitions on one job from two real threads at once."""
        charging = pair == ("start", "reap") and self.impatient is not None
        if "reap" in pair and not charging:
            self.make_stale(job)
        barrier = threading.Barrier(2)
        errors = []

        def run(name):
            # start against reap: the job is not made stale first (start would then do
            # nothing); the reaper is one whose lease is out for any job, started or not,
            # and the start holds its row lock a moment between the UPDATE and the charge.
            # Either the reap wins (failed, never charged) or it waits for the charge and
            # reaps a running, charged job, which the finalizer then refunds.
            app = self.impatient if charging and name == "reap" else self.app
            slow = "after_running=sleep:0.02" if charging and name == "start" else ""
            with app.app_context(), failpoints.on_this_thread(slow):
                barrier.wait()
                try:
                    if name == "reap":
                        transitions.reap(job)
                    elif name == "poll":
                        views.view(job, self.owner[job])
                    else:
                        getattr(self, name)(job)
                except Exception as exc:  # noqa: BLE001 - asserted below
                    errors.append(exc)
                finally:
                    db.session.rollback()

        threads = [threading.Thread(target=run, args=(name,)) for name in pair]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == []

    def make_stale(self, job):
        self.q(
            "UPDATE assessment_jobs SET created_at = created_at - interval '1 hour',"
            " started_at = started_at - interval '1 hour',"
            " heartbeat_at = heartbeat_at - interval '1 hour' WHERE id = %(j)s",
            j=job,
        )

    @staticmethod
    def check_shown(shown, status, finalized, consumes_, refunds, open_):
        """What the fragment says about a point agrees with the ledger and incidents."""
        if shown == Billing.REFUNDED:
            assert refunds == 1
        if shown == Billing.NOT_CHARGED:
            assert consumes_ == 0
        if shown == Billing.SUPPORT:  # an open question: nothing settled it yet
            assert open_ and status == "failed" and not finalized
        if shown == Billing.CHARGED:
            assert consumes_ == 1 and refunds == 0
        if shown == Billing.PENDING:  # "checking" only while the question is open
            assert status in ("pending", "running") or not finalized

    def facts(self, job=None):
        rows = self.q(FACTS_SQL, users=self.user_ids)
        return rows if job is None else next(f for f in rows if f[0] == job)

    @invariant()
    def ledger_and_page_agree(self):
        rows = self.q(
            "SELECT u.id, u.point_balance, coalesce(sum(l.amount), 0) FROM users u"
            " LEFT JOIN point_ledger l ON l.user_id = u.id WHERE u.id = ANY(%(users)s)"
            " GROUP BY u.id",
            users=self.user_ids,
        )
        for user_id, balance, total in rows:
            assert balance == total >= 0, user_id
        facts = self.facts()
        for job, _, status, finalized, consumes_, refunds, own, open_, by_support in facts:
            assert consumes_ <= 1 and refunds <= 1 and own == refunds, job
            if status == "pending":
                assert consumes_ == 0, job  # charged only when it starts
            if status == "running":
                assert consumes_ == 1, job  # a running job is a charged job
            if status == "succeeded":
                assert (consumes_, refunds) == (1, 0), job
            if status == "failed" and finalized and consumes_ > refunds:
                # Refunded if charged, unless support decided no refund is due.
                assert by_support, job
            if finalized or status == "succeeded":
                assert not open_, job  # nothing would ever resolve it
            # What the poll's own read (without its settling) would show right now.
            shown = views._as_view(views._select(job, self.owner[job], None)).billing
            self.check_shown(shown, status, finalized, consumes_, refunds, open_)


def test_any_interleaving_keeps_the_ledger_honest(make_app, database_url):
    # A long lease: a job goes stale only when a step makes it so.
    app = make_app(JOB_LEASE_SECONDS=600, JOB_MAX_RUNTIME_SECONDS=1200)
    impatient = make_app(JOB_LEASE_SECONDS=0.001, JOB_HEARTBEAT_SECONDS=0.0001)
    run_state_machine_as_test(lambda: Ledger(app, database_url, impatient), settings=SETTINGS)
    # The auditor agrees with the invariants, over everything the examples left behind.
    audit = app.test_cli_runner().invoke(args=["ledger-check"])
    assert audit.exit_code == 0, audit.output


# --- Points people buy (issue 27): purchases, re-deliveries, refunds, among the jobs ---

PACKS = {1: 500, 5: 2000}
PURCHASE_FACTS_SQL = """
SELECT c.id, c.user_id,
  (SELECT count(*) FROM point_ledger p WHERE p.checkout_session = c.id AND p.kind = 'purchase'),
  (SELECT coalesce(sum(p.amount), 0) FROM point_ledger p
    WHERE p.checkout_session = c.id AND p.kind = 'purchase'),
  (SELECT count(*) FROM point_ledger r
    WHERE r.checkout_session = c.id AND r.kind = 'purchase_refund'),
  (SELECT coalesce(-sum(r.amount), 0) FROM point_ledger r
    WHERE r.checkout_session = c.id AND r.kind = 'purchase_refund'),
  EXISTS (SELECT 1 FROM incidents i WHERE i.payment_ref = c.id AND i.code = 'REFUND_AFTER_SPEND'),
  (SELECT count(*) FROM point_ledger s
    WHERE s.checkout_session = c.id AND s.kind = 'purchase_restore'),
  (SELECT coalesce(sum(s.amount), 0) FROM point_ledger s
    WHERE s.checkout_session = c.id AND s.kind = 'purchase_restore'),
  EXISTS (SELECT 1 FROM incidents i WHERE i.payment_ref = c.id
    AND i.code = 'REFUND_AFTER_SPEND' AND i.resolved_at IS NULL)
FROM checkout_sessions c WHERE c.user_id = ANY(%(users)s)
"""


class LedgerWithPurchases(Ledger):
    """The jobs' machine, and users who buy packs (paid at once or at a konbini later),
    whose webhooks arrive again, at once from two threads, or for the wrong amount, and
    whose payments are refunded in full or in part, racing the jobs that spend them, and
    whose full refund may fail or be cancelled (before or after its charge.refunded)."""

    bought = Bundle("bought")

    def __init__(self, app, database_url, impatient=None):
        super().__init__(app, database_url, impatient)
        self.paid: set[str] = set()  # sessions a paid event was delivered for
        self.refunded: set[str] = set()  # sessions whose pack a full refund reversed
        self.full: set[str] = set()  # sessions a full refund was delivered for (paid or not)
        self.partial: set[str] = set()  # sessions a partial refund was delivered for
        self.undone: set[str] = set()  # sessions whose full refund failed or was cancelled
        self.restored: set[str] = set()  # sessions whose reversal that gave back
        # Stripe's event times: every charge.refunded of the example is older than any
        # refund's failure, as a refund fails after it is made.
        self.refund_time = int(time.time()) - 1000
        from app.points import checkout, purchases  # here: apart from the jobs' section

        self.purchases = purchases
        self.packs = checkout.parse_packs(",".join(f"{p}:{y}" for p, y in PACKS.items()))

    def handle(self, kind, obj, created=None):
        event = {"type": kind, "data": {"object": obj}, "created": created}
        return self.purchases.handle(event, self.packs)

    def session_object(self, sid, user_id, points, paid=True, amount=None):
        return {
            "id": sid,
            "object": "checkout.session",
            "amount_total": PACKS[points] if amount is None else amount,
            "currency": "jpy",
            "client_reference_id": str(user_id),
            "metadata": {"user_id": str(user_id), "points": str(points)},
            "payment_intent": f"pi_{sid}",
            "payment_status": "paid" if paid else "unpaid",
        }

    @rule(
        target=bought,
        user=st.integers(0, USERS - 1),
        points=st.sampled_from(sorted(PACKS)),
        konbini=st.booleans(),
    )
    def buy(self, user, points, konbini):
        user_id, sid = self.user_ids[user], f"cs_test_{uuid.uuid4().hex}"
        # What start_checkout records when Stripe has created the session.
        self.q(
            "INSERT INTO checkout_sessions (id, user_id, points, amount, currency)"
            " VALUES (%(s)s, %(u)s, %(p)s, %(a)s, 'jpy')",
            s=sid,
            u=user_id,
            p=points,
            a=PACKS[points],
        )
        kind = "checkout.session.completed"
        self.handle(kind, self.session_object(sid, user_id, points, paid=not konbini))
        if not konbini:
            self.credited(sid)
        return (sid, user_id, points)

    def credited(self, sid):
        """A paid event was handled: a full refund delivered before it (and no partial one
        before that) is reversed by the credit itself, in its transaction."""
        self.paid.add(sid)
        if sid in self.full and sid not in self.partial and sid not in self.undone:
            self.refunded.add(sid)

    @rule(purchase=bought)
    def pay_at_the_store(self, purchase):
        sid, user_id, points = purchase
        obj = self.session_object(sid, user_id, points)
        self.handle("checkout.session.async_payment_succeeded", obj)
        self.credited(sid)

    @rule(target=Ledger.jobs, purchase=bought)
    def spend(self, purchase):
        """The buyer starts a job: a point of what they bought may be spent before a refund."""
        return self.submit(self.user_ids.index(purchase[1]), started=True)

    @rule(purchase=bought)
    def redeliver(self, purchase):
        sid, user_id, points = purchase
        paid = sid in self.paid
        self.handle("checkout.session.completed", self.session_object(sid, user_id, points, paid))

    @rule(purchase=bought)
    def deliver_a_wrong_amount(self, purchase):
        sid, user_id, points = purchase
        obj = self.session_object(sid, user_id, points, amount=PACKS[points] + 1)
        # Once credited, a differing event changes nothing and raises nothing.
        expected = "already_credited" if sid in self.paid else "mismatch"
        assert self.handle("checkout.session.completed", obj) == expected

    @rule(purchase=bought, full=st.booleans())
    def refund_payment(self, purchase, full):
        sid, _, points = purchase
        amount = PACKS[points]
        charge = {
            "id": f"ch_{sid}",
            "object": "charge",
            "amount": amount,
            "amount_refunded": amount if full else amount // 2,
            "currency": "jpy",
            "payment_intent": f"pi_{sid}",
            "refunded": full,
        }
        if sid in self.undone:
            # Older than the refund's failure delivered before it: it takes nothing.
            assert self.handle("charge.refunded", charge, self.refund_time) == "superseded"
            return
        if not full:
            self.partial.add(sid)  # before handling: a racing credit may read it
        self.handle("charge.refunded", charge, self.refund_time)
        if full:
            # Reversed now if credited, else by the credit when it lands; never after a
            # partial refund (support settles those).
            self.full.add(sid)
            if sid in self.paid and sid not in self.partial:
                self.refunded.add(sid)

    @rule(
        purchase=bought,
        kind=st.sampled_from(["refund.failed", "charge.refund.updated"]),
        status=st.sampled_from(["failed", "canceled", "pending"]),
    )
    def refund_comes_undone(self, purchase, kind, status):
        """The full refund fails or is cancelled (a konbini refund left unclaimed), or is
        still waiting for bank details: what its reversal took comes back, once."""
        sid, _, points = purchase
        refund = {
            "id": f"re_{sid}",
            "object": "refund",
            "amount": PACKS[points],
            "charge": f"ch_{sid}",
            "payment_intent": f"pi_{sid}",
            "status": status,
        }
        self.handle(kind, refund, self.refund_time + 500)
        if status == "pending":
            return
        self.undone.add(sid)
        if sid in self.refunded:
            self.restored.add(sid)

    @rule(user=st.integers(0, USERS - 1), amount=st.sampled_from([-5, -1, 1, 3]))
    def support_adjusts(self, user, amount):
        """Support grants points, or takes some back: never below zero, nothing half-done."""
        from app.points import grants, ledger

        limit = self.app.config["SUPPORT_GRANT_APPROVAL_POINTS"]  # as the console asks
        try:
            grants.adjust(
                self.user_ids[user],
                amount,
                self.support_id,
                "checked",
                nonce=uuid.uuid4().hex,  # the console's form: one each
                approval_above=limit,
            )
        except (ledger.InsufficientPoints, grants.NeedsApproval):
            pass  # nothing written, or a request that waits for a second support user

    @rule(purchase=bought, job=Ledger.jobs, what=st.sampled_from(["redeliver", "refund", "pay"]))
    def race_purchase(self, purchase, job, what):
        """A webhook and a job's start at once, from two real threads (or two deliveries)."""
        barrier = threading.Barrier(2)
        errors = []

        def run(step):
            with self.app.app_context():
                barrier.wait()
                try:
                    step()
                except Exception as exc:  # noqa: BLE001 - asserted below
                    errors.append(exc)
                finally:
                    db.session.rollback()

        steps = {
            "redeliver": lambda: self.redeliver(purchase),
            "refund": lambda: self.refund_payment(purchase, True),
            "pay": lambda: self.pay_at_the_store(purchase),
        }
        second = steps[what] if job is None else (lambda: self.start(job))
        threads = [threading.Thread(target=run, args=(s,)) for s in (steps[what], second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == []

    @invariant()
    def purchases_credit_once(self):
        for row in self.q(PURCHASE_FACTS_SQL, users=self.user_ids):
            sid, _, credits, credited, reversals, taken, incident, restores, given, chasing = row
            assert credits == (1 if sid in self.paid else 0), sid
            assert reversals == (1 if sid in self.refunded else 0), sid
            assert 0 <= taken <= credited, sid
            if reversals and taken < credited:
                assert incident, sid  # support hears of the points already spent
            # A refund that came undone gives back exactly what its reversal took, once.
            assert restores == (1 if sid in self.restored else 0), sid
            assert given == (taken if restores else 0), sid
            # ...and support is no longer asked to chase the points spent before it.
            assert not (restores and chasing), sid


def test_any_interleaving_with_purchases_keeps_the_ledger_honest(make_app, database_url):
    app = make_app(JOB_LEASE_SECONDS=600, JOB_MAX_RUNTIME_SECONDS=1200)
    impatient = make_app(JOB_LEASE_SECONDS=0.001, JOB_HEARTBEAT_SECONDS=0.0001)
    run_state_machine_as_test(
        lambda: LedgerWithPurchases(app, database_url, impatient),
        settings=settings(SETTINGS, max_examples=30),
    )
    audit = app.test_cli_runner().invoke(args=["ledger-check"])
    assert audit.exit_code == 0, audit.output
