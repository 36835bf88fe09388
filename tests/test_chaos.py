"""make chaos's harness, run briefly: kills, database faults and webhook storms, then the books."""

import random
import shutil
from pathlib import Path

import pytest

from bench.chaos import Chaos, tree_line, write_markdown
from bench.chaos_cluster import Cluster, Death
from bench.chaos_logs import death_excused, log_faults, wall_clock
from tests.stripeplans import REFUND_KINDS, STORIES, tell
from tests.stripestorm import Sale, Storm

pytestmark = pytest.mark.server


@pytest.mark.first
def test_a_short_chaos_run_keeps_the_books_and_its_checker_sees_a_lie():
    # timed=False: how soon a job settles is make chaos's figure; a test asserts no wall time.
    chaos = Chaos(
        kills=30, minutes=5, users=4, seed=20261202, db_faults=15, restarts=1, deliveries=150,
        timed=False,
    )  # fmt: skip
    try:
        out = chaos.run()

        assert out["violations"] == []
        # Every kind of fault happened, at least half as often as wanted (a loaded machine
        # restarts processes slowly; the run stops at its minutes).
        assert all(out["reached"][k] >= n / 2 for k, n in out["wanted"].items()), out["reached"]
        assert 0 < out["pages_checked"] <= out["jobs"] and out["credits"] > out["reversals"] > 0
        # The checker is not blind: a page that says other than the ledger is a violation. The
        # lie is told about whichever job ended: a success called refunded, a failure charged.
        job_id, status = chaos.db.rows(
            "SELECT id::text, status FROM assessment_jobs WHERE status IN ('succeeded', 'failed')"
            " ORDER BY status = 'succeeded' DESC LIMIT 1"
        )[0]
        lie = "refunded" if status == "succeeded" else "charged"
        chaos.check_page(job_id, status, lie, "Your point was refunded.")
        assert len(chaos.violations) == 1, chaos.violations
        assert chaos.violations[0].startswith(f"job {job_id}: the page says {lie}, the ledger ")
        assert "faults: [" in chaos.violations[0] and "ledger: [(" in chaos.violations[0]
        # Nor blind to money: a sale credited that was never paid.
        sale = next(s for s in chaos.storm.sales if s.paid)
        sale.paid = False
        assert [s for s, _ in chaos.sale_books()[0]] == [sale]
    finally:
        chaos.close()
    shutil.rmtree(chaos.logs, ignore_errors=True)


# The logs below are CONSTRUCTED (not recorded from a run), in the line format a queue
# worker logs in once it has migrated at its start (alembic's "%(levelname)-5.5s
# [%(name)s] %(message)s": no time, so the harness says when it saw the process end), with
# the tracebacks Python prints for procrastinate's and psycopg's errors. One is RECORDED:
# tests/recorded/chaos/worker-pruned.log, a real worker whose row was deleted under it.
START = "INFO  [procrastinate.worker.worker] Starting worker on queues assessments\n"
FETCH = (
    'Traceback (most recent call last):\n  File "procrastinate/sync_psycopg_connector.py",'
    " line 29, in wrap_exceptions\n    yield\n"
)
PRUNED = (
    FETCH + 'psycopg.errors.ForeignKeyViolation: insert or update on table "procrastinate_jobs"'
    ' violates foreign key constraint "procrastinate_jobs_worker_id_fkey"\n'
    'DETAIL:  Key (worker_id)=(41) is not present in table "procrastinate_workers".\n'
)
CONNECTOR = (
    "\nThe above exception was the direct cause of the following exception:\n\n"
    'Traceback (most recent call last):\n  File "app/jobs/worker.py", line 163, in run\n'
    '    asyncio.run(main())\n  File "procrastinate/sync_psycopg_connector.py", line 44,'
    " in wrap_exceptions\n    raise exceptions.ConnectorException from exc\n"
    "procrastinate.exceptions.ConnectorException: \n    Database error.\n    \n"
)
HANDLING = (
    "\nDuring handling of the above exception, another exception occurred:\n\n"
    'Traceback (most recent call last):\n  File "app/jobs/worker.py", line 170, in run\n'
    "    settled_job = jobs[job_id]\nKeyError: 'job_id'\n"
)
REFUSED = (
    'psycopg.OperationalError: connection failed: connection to server at "127.0.0.1", port'
    " 41234 failed: Connection refused\n\tIs the server running on that host and accepting"
    " TCP/IP connections?\n"
)
UNASKED = (
    'Traceback (most recent call last):\n  File "app/jobs/worker.py", line 152, in main\n'
    "RuntimeError: the queue worker stopped without being told to\n"
)
STOP = "ERROR [app.jobs.worker] worker stopped by an error\n"

PRUNED_DEATH = START + STOP + PRUNED + CONNECTOR
# A crash ends the worker; at teardown asyncio reports a task the connector's error lost.
CRASH_THEN_LOST_TASK = (
    START + STOP + 'Traceback (most recent call last):\n  File "app/jobs/worker.py", line 160,'
    " in run\nZeroDivisionError: division by zero\n"
    "ERROR [asyncio] Task exception was never retrieved\nfuture: <Task finished"
    " name='Task-12' coro=<Worker._run_loop() done> exception=ConnectorException()>\n"
    + FETCH + REFUSED + CONNECTOR
)  # fmt: skip
# The worker's own bug raised while it handled the connector's error: the bug ends it.
KEYERROR_WHILE_HANDLING = START + STOP + PRUNED + CONNECTOR + HANDLING
# procrastinate's listener lost the database; its run returned; the worker ends on that.
LISTENER_LOST = (
    START + "ERROR [procrastinate.worker.worker] Side task listener failed with exception:"
    ' connection failed: connection to server at "127.0.0.1", port 41234 failed: Connection'
    " refused\n\tIs the server running on that host and accepting TCP/IP connections?,"
    " stopping worker\n" + 'Traceback (most recent call last):\n  File "procrastinate/'
    'worker.py", line 612, in _listen\n' + REFUSED
    + "INFO  [procrastinate.worker.worker] Stopped worker on queues assessments\n"
    + STOP + UNASKED
)  # fmt: skip
# An unasked stop after another thread once read "connection failed": nothing lost the
# listener, so nothing explains why procrastinate stopped.
UNASKED_AFTER_A_MISSED_BEAT = (
    START + "ERROR [app.jobs.worker] could not keep queued jobs fresh\n"
    + 'Traceback (most recent call last):\n  File "app/jobs/worker.py", line 80, in'
    " keep_queued\n" + REFUSED + STOP + UNASKED
)  # fmt: skip
# The same death in app/operations/logs.py's text format: its own line's time decides.
STAMPED_DEATH = (
    "2026-12-02 05:43:15,120 ERROR app.jobs.worker: worker stopped by an error\n"
    + PRUNED + CONNECTOR
)  # fmt: skip
FAILPOINT = START + "WARNI [app.operations.failpoints] failpoint after_consume: kill\n"
RECORDED_PRUNED = (Path(__file__).parent / "recorded/chaos/worker-pruned.log").read_text()

STALL = [(1000.0, 1003.0, "stall")]
SEEN = 1004.1  # the watcher saw the worker dead 1.1 s after the stall
EARLIER = [(880.0, 883.0, "cut")]  # two minutes before
STAMP = wall_clock("2026-12-02 05:43:15,120")


@pytest.mark.parametrize(
    "log,faults,ended,excused",
    [
        (PRUNED_DEATH, STALL, SEEN, "database error in a fault"),
        (RECORDED_PRUNED, STALL, SEEN, "database error in a fault"),
        (LISTENER_LOST, STALL, SEEN, "database error in a fault"),
        (LISTENER_LOST, [(1003.5, 1006.0, "refuse")], SEEN, "database error in a fault"),
        (STAMPED_DEATH, [(STAMP - 2, STAMP - 1, "stall")], None, "database error in a fault"),
        (PRUNED_DEATH, EARLIER, SEEN, ""),
        (PRUNED_DEATH, [], SEEN, ""),
        (RECORDED_PRUNED, EARLIER, SEEN, ""),
        (LISTENER_LOST, EARLIER, SEEN, ""),
        (PRUNED_DEATH, STALL, None, ""),  # no time from its line nor from the harness
        (STAMPED_DEATH, [(STAMP - 60, STAMP - 50, "stall")], STAMP - 49, ""),  # its line rules
        (CRASH_THEN_LOST_TASK, STALL, SEEN, ""),
        (KEYERROR_WHILE_HANDLING, STALL, SEEN, ""),
        (UNASKED_AFTER_A_MISSED_BEAT, STALL, SEEN, ""),
        (PRUNED_DEATH.replace("procrastinate_workers", "users"), STALL, SEEN, ""),
        (PRUNED_DEATH.replace("ForeignKeyViolation", "UndefinedFunction"), STALL, SEEN, ""),
        (STOP.join(PRUNED_DEATH.split(STOP)[:1]), STALL, SEEN, ""),  # it never stopped
    ],
    ids=[
        "pruned-in-a-stall", "recorded-pruned-in-a-stall", "listener-lost-after-a-stall",
        "listener-lost-in-a-refusal", "stamped-in-a-stall", "pruned-no-fault-near",
        "pruned-no-fault-at-all", "recorded-pruned-no-fault-near", "listener-lost-no-fault-near",
        "pruned-no-time", "stamped-line-outside", "crash-then-lost-task",
        "keyerror-while-handling", "unasked-after-a-missed-beat", "foreign-key-not-the-workers",
        "connector-over-a-bug", "never-stopped",
    ],
)  # fmt: skip
def test_a_worker_death_is_excused_only_by_its_own_database_error_in_a_recorded_fault(
    log, faults, ended, excused
):
    """Constructed logs (and one recorded): the death's own final exception, tied by time
    to a fault the run recorded."""
    assert death_excused(log, faults, armed=None, code=1, ended=ended) == excused


@pytest.mark.parametrize(
    "log,armed,code,excused",
    [
        (FAILPOINT, "after_consume", -9, "failpoint after_consume"),
        (FAILPOINT, "before_refund", -9, ""),  # another failpoint's line: not this one's
        (FAILPOINT, "after_consume", 1, ""),  # a failpoint kills, it does not exit 1
        (START, "after_consume", -9, ""),  # armed, but the failpoint never fired
        (FAILPOINT + "[2026-12-02 05:43:20 +0000] [41] [INFO] Booting worker with pid: 42\n",
         "after_consume", -9, ""),  # the process went on after it (a web master)
        (FAILPOINT + "INFO  [procrastinate.worker.worker] Starting job assess[7]\n",
         "after_consume", -9, "failpoint after_consume"),  # another thread, that instant
        (FAILPOINT + STOP + UNASKED, "after_consume", -9, ""),  # it went on to stop
        (PRUNED_DEATH, "after_consume", 1, "database error in a fault"),
        (CRASH_THEN_LOST_TASK, "after_consume", 1, ""),
    ],
    ids=[
        "fired", "another-failpoint", "exit-1", "never-fired", "lived-on", "a-line-after",
        "stopped-after", "armed-pruned", "armed-crash",
    ],
)  # fmt: skip
def test_an_armed_death_is_excused_only_at_its_failpoint(log, armed, code, excused):
    """Constructed logs: an armed process's death is checked, not assumed."""
    assert death_excused(log, STALL, armed=armed, code=code, ended=SEEN) == excused


def test_only_the_excused_traceback_s_foreign_key_violation_is_excused():
    """Constructed logs: an excused death does not excuse the rest of its log."""
    job_error = "ERROR [app.jobs.runner] job failed\n" + PRUNED
    assert log_faults("w.log", PRUNED_DEATH, STALL, SEEN) == []
    assert log_faults("w.log", START + job_error + PRUNED_DEATH[len(START) :], STALL, SEEN) == [
        "w.log: 1 x ForeignKeyViolation"
    ]
    assert log_faults("w.log", PRUNED_DEATH, EARLIER, SEEN) == ["w.log: 1 x ForeignKeyViolation"]
    assert log_faults("w.log", PRUNED_DEATH, STALL, None) == ["w.log: 1 x ForeignKeyViolation"]
    assert log_faults("w.log", KEYERROR_WHILE_HANDLING, STALL, SEEN) == [
        "w.log: 1 x ForeignKeyViolation"
    ]


def test_the_cluster_judges_each_death_by_its_own_log_at_the_end(tmp_path):
    """Constructed logs: the watcher's deaths, judged against the run's recorded faults."""
    cluster = Cluster("postgresql://unused", tmp_path, 1, print, {})
    logs = {"worker1-3.log": PRUNED_DEATH, "worker2-5.log": FAILPOINT, "web1-2.log": START}
    logs["web2-4.log"] = FAILPOINT  # a web worker's failpoint fired; its master died later
    for name, text in logs.items():
        (tmp_path / name).write_text(text)
    cluster.deaths = [
        Death("worker1", tmp_path / "worker1-3.log", None, 1, SEEN),
        Death("worker2", tmp_path / "worker2-5.log", "after_consume", -9, SEEN),
        Death("web1", tmp_path / "web1-2.log", None, 1, SEEN),
        Death("web2", tmp_path / "web2-4.log", "after_consume", -9, SEEN),
    ]
    wrong = cluster.judge(STALL)
    assert [d.slot for d in cluster.gave_up] == ["worker1"]
    assert [w.split(" and ")[0] for w in wrong] == [
        "web1-2.log died unarmed",
        "web2-4.log died armed after_consume",
    ]
    assert len(cluster.judge(EARLIER)) == 3 and cluster.gave_up == []
    # A worker the killer took while it ended: its log is read with the kill's time.
    cluster.ends["worker1-3.log"] = SEEN
    assert cluster.log_faults(STALL) == [] and cluster.log_faults(EARLIER) == [
        "worker1-3.log: 1 x ForeignKeyViolation"
    ]


def test_the_storm_tells_every_story_in_stripe_s_shapes():
    """Constructed events (tests/fakestripe.py's shapes): every story, every refund kind."""
    payments = [tell(random.Random(n), f"pi_{n:020d}", 2000, 1_800_000_000) for n in range(400)]
    assert {p.story for p in payments} == set(STORIES)
    kinds = {kind for p in payments for kind, _, _ in p.events}
    assert kinds == set(REFUND_KINDS)
    statuses = {o["status"] for p in payments for k, o, _ in p.events if k != "charge.refunded"}
    assert statuses >= {"failed", "canceled", "requires_action", "needs_response"}
    for p in payments:
        times = [t for _, _, t in p.events]
        assert times == sorted(set(times))  # each happening at a Stripe time of its own
        charges = [o for k, o, _ in p.events if k == "charge.refunded"]
        assert all(o["refunded"] == (o["amount_refunded"] == 2000) for o in charges)
        assert 0 <= p.refunded() <= 2000 and len(p.refunds) == len(charges)
        undone = [r for r in p.refunds if r.undone]
        ends = [o for k, o, _ in p.events if k != "charge.refunded" and o["status"] in
                ("failed", "canceled")]  # fmt: skip
        assert [r.id for r in undone] == [o["id"] for o in ends]
        # A Refund's object says when it was made: with its charge.refunded, before it ended.
        made = {r.id: r.created for r in p.refunds}
        assert all(
            o["created"] == made[o["id"]] < t for k, o, t in p.events if o["object"] == "refund"
        )
    several = [p for p in payments if len(p.refunds) == 2]
    assert {p.story for p in several} == {"two partials", "partial then the rest",
                                          "one of two fails"}  # fmt: skip


def test_the_storm_s_books_want_exact_points_or_an_incident_for_support():
    """Constructed rows: exact books need no incident; anything else needs one naming the sale."""
    storm = Storm(lambda: [], 1, print)
    try:
        stories = {}
        for n, story in enumerate(["kept", "full", "full", "partial", "disputed", "kept"]):
            sale = Sale(f"cs_test_{random.Random(n).getrandbits(128):032x}", 7, 5, 0.0, paid=True)
            sale.payment = next(
                p for s in range(500)
                if (p := tell(random.Random(s), sale.payment_intent, 2000, 0)).story == story
            )  # fmt: skip
            storm.sales.append(sale)
            stories[sale.session_id] = sale
        ids = list(stories)
        rows = [
            (ids[0], "paid", "purchase", 5),  # kept: the pack
            (ids[1], "paid", "purchase", 5), (ids[1], "paid", "purchase_refund", -5),  # unspent
            (ids[2], "paid", "purchase", 5), (ids[2], "paid", "purchase_refund", -2),  # spent
            (ids[3], "paid", "purchase", 5),  # a part refunded: support decides
            (ids[4], "paid", "purchase", 5),  # disputed: support answers it
            (ids[5], "paid", "purchase", 5),
        ]  # fmt: skip
        spent = (1, f"{ids[2]}", "refunded after 3 of its 5 points were spent")
        partial = (2, f"{ids[3]} refunded 500", "500 of 2000 yen refunded")
        chargeback = (3, "dp_1", f"dispute on payment pi_{ids[4][-20:]}")
        stray = (4, ids[5], "an incident about a sale nothing happened to")
        wrong, explained = storm.books(rows, [spent, partial, chargeback, stray])
        assert wrong == [] and explained == {1, 2, 3}
        wrong, _ = storm.books(rows, [stray])
        assert [s.session_id for s, _ in wrong] == ids[2:5]
        rows.append((ids[0], "paid", "purchase_refund", -5))  # taken back, nothing refunded
        wrong, _ = storm.books(rows, [spent, partial, chargeback])
        assert [s.session_id for s, _ in wrong] == [ids[0]]
    finally:
        storm.close()


CLEAN = {"commit": "702118b0bfe7" + "0" * 28, "changes": [], "diff": "e3b0c44298fc1c14"}
DIRTY = CLEAN | {"changes": [" M bench/chaos.py", "?? notes.txt"], "diff": "5d41402abc4b2a76"}


@pytest.mark.parametrize(
    "started,ended,line",
    [
        (CLEAN, CLEAN, "702118b0bfe7, clean tree"),
        (DIRTY, DIRTY, "DIRTY TREE: 702118b0bfe7 with 2 uncommitted changes (bench/chaos.py,"
         " notes.txt)"),
        (CLEAN, CLEAN | {"commit": "a" * 40}, "MOVING TREE: 702118b0bfe7 with 0 uncommitted"
         " changes at the start, aaaaaaaaaaaa with 0 at the end"),
        (DIRTY, DIRTY | {"diff": "0" * 16}, "MOVING TREE: 702118b0bfe7 with 2 uncommitted"
         " changes at the start, 702118b0bfe7 with 2 at the end"),
    ],
    ids=["clean", "dirty", "committed-meanwhile", "edited-meanwhile"],
)  # fmt: skip
def test_chaos_md_says_in_its_first_line_which_tree_the_run_ran(tmp_path, started, ended, line):
    out = {"table": [("run", "1.0 min, seed 1")], "violations": []}
    out |= {title: {} for title in (
        "kills by target", "jobs by outcome (status, error code)",
        "pages as the users read them (status/billing)", "paid sales by story after the payment",
        "incidents for support, by code",
    )}  # fmt: skip
    assert tree_line(started, ended) == line
    write_markdown(out, tmp_path / "CHAOS.md", started, ended)
    text = (tmp_path / "CHAOS.md").read_text()
    assert text.splitlines()[0] == f"# Chaos at {line}: kills, database faults and payments"
    assert "##" not in text  # no section but the harness's own
