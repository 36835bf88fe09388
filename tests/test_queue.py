"""JOB_EXECUTOR=procrastinate in one process: row and task together, admission, the task."""

import threading
import uuid

import pytest

from app.jobs import pipeline, procrastinate_executor, transitions
from app.operations import failpoints
from tests.conftest import (
    idle_in_transaction,
    job_id_from,
    off_the_main_thread,
    signed_in,
    wait_for,
)

pytestmark = pytest.mark.minimal_work

QUEUE = {"JOB_EXECUTOR": "procrastinate"}


def test_submit_inserts_the_job_and_its_task_together(make_app, sql):
    app, client, actions = signed_in(make_app, **QUEUE)

    job_id = job_id_from(actions.submit())

    assert sql("SELECT status FROM assessment_jobs") == [("pending",)]
    assert sql("SELECT task_name, queue_name, status, args->>'job_id' FROM procrastinate_jobs") == [
        ("assess", "assessments", "todo", str(job_id))
    ]
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'consume'") == [(0,)]


def test_a_failure_between_insert_and_defer_leaves_neither(make_app, sql):
    app, client, actions = signed_in(make_app, **QUEUE)
    token = actions.token("/assessments/new")
    failpoints.configure("after_insert=raise")

    with pytest.raises(failpoints.FailpointError):
        actions.submit(token=token)

    assert sql("SELECT count(*) FROM assessment_jobs") == [(0,)]
    assert sql("SELECT count(*) FROM procrastinate_jobs") == [(0,)]
    assert sql("SELECT point_balance FROM users") == [(3,)]


def test_a_full_queue_is_503_and_leaves_nothing_behind(make_app, sql):
    app, client, first = signed_in(make_app, MAX_QUEUED_JOBS=1, **QUEUE)
    job_id_from(first.submit())
    _, _, second = signed_in(make_app, MAX_QUEUED_JOBS=1, **QUEUE)

    busy = second.submit()

    assert busy.status_code == 503
    assert busy.headers["Retry-After"]
    assert "Nothing was charged" in busy.get_data(as_text=True)
    assert sql("SELECT count(*) FROM assessment_jobs") == [(1,)]
    assert sql("SELECT count(*) FROM procrastinate_jobs") == [(1,)]
    assert sql("SELECT point_balance FROM users ORDER BY id") == [(3,), (3,)]


def test_a_second_submit_is_409_even_when_the_queue_is_full(make_app):
    app, client, actions = signed_in(make_app, MAX_QUEUED_JOBS=1, **QUEUE)
    job_id_from(actions.submit())

    assert actions.submit().status_code == 409


def test_the_task_runs_the_job_through_the_same_transitions(make_app, sql):
    # The report itself, not the minimal work: the one run of it through a queue task here.
    app, client, actions = signed_in(make_app, **QUEUE, JOB_WORK="app.assessment.job")
    job_id = job_id_from(actions.submit())

    procrastinate_executor.run_task(app, str(job_id))

    assert sql("SELECT status, result ? 'layers', message FROM assessment_jobs") == [
        ("succeeded", True, "Your report is ready.")
    ]
    assert sql("SELECT kind FROM point_ledger WHERE job_id IS NOT NULL") == [("consume",)]
    assert sql("SELECT point_balance FROM users") == [(2,)]


def test_a_task_whose_job_is_settled_does_nothing(make_app, sql):
    app, client, actions = signed_in(make_app, **QUEUE)
    job_id = job_id_from(actions.submit())
    with app.app_context():
        transitions.fail_and_settle(job_id, transitions.INTERRUPTED, "gone")

    # Delivered late, or twice: nothing done, and the task ends with its job's outcome.
    with pytest.raises(procrastinate_executor.JobNotSucceeded):
        procrastinate_executor.run_task(app, str(job_id))

    assert sql("SELECT status, error_code FROM assessment_jobs") == [("failed", "INTERRUPTED")]
    assert sql("SELECT count(*) FROM point_ledger WHERE job_id IS NOT NULL") == [(0,)]
    assert sql("SELECT point_balance FROM users") == [(3,)]


def test_only_a_task_whose_job_settled_a_grace_ago_is_ended_with_its_outcome(make_app, sql):
    from app.jobs import worker

    app, client, actions = signed_in(make_app, **QUEUE)
    job_id = job_id_from(actions.submit())
    sql("UPDATE procrastinate_jobs SET status = 'doing'")  # taken by a worker that then died
    with app.app_context():
        # Its job still pending or running (a draining worker's, a slow one's): left alone.
        assert worker.close_settled_tasks(0, 60) == 0
        procrastinate_executor.run_task(app, str(job_id))  # the job succeeds; the task did not end
        assert worker.close_settled_tasks(60, 60) == 0  # settled only now: its worker may end it
        sql(
            "UPDATE assessment_jobs SET created_at = created_at - interval '61 seconds',"
            " started_at = started_at - interval '61 seconds',"
            " finished_at = finished_at - interval '61 seconds'"
        )
        # A live worker's task (its thread not back from a fetch yet) is never closed by
        # another, however long ago its job settled: its worker records it when it returns.
        (alive,) = sql("INSERT INTO procrastinate_workers DEFAULT VALUES RETURNING id")[0]
        sql("UPDATE procrastinate_jobs SET worker_id = %(w)s", w=alive)
        assert worker.close_settled_tasks(60, 60) == 0
        sql("UPDATE procrastinate_workers SET last_heartbeat = now() - interval '61 seconds'")
        assert worker.close_settled_tasks(60, 60) == 1
        assert worker.close_settled_tasks(60, 60) == 0  # once

    assert sql("SELECT status, attempts FROM procrastinate_jobs") == [("succeeded", 1)]
    assert sql("SELECT kind FROM point_ledger WHERE job_id IS NOT NULL") == [("consume",)]


def work_the_queue(app):
    """Run a procrastinate worker in this process until the queue has nothing due."""
    queue = procrastinate_executor.queue_app(app)
    off_the_main_thread(
        lambda: queue.run_worker(
            queues=[procrastinate_executor.QUEUE], wait=False, install_signal_handlers=False
        )
    )


def test_the_queue_records_each_task_with_its_jobs_outcome(make_app, sql):
    app, client, actions = signed_in(make_app, **QUEUE)
    done = job_id_from(actions.submit())
    work_the_queue(app)
    _, _, other = signed_in(make_app, **QUEUE)
    cancelled = job_id_from(other.submit())
    with app.app_context():
        transitions.fail_and_settle(cancelled, transitions.CANCELLED, "cancelled")

    work_the_queue(app)

    assert sql("SELECT args->>'job_id', status FROM procrastinate_jobs ORDER BY id") == [
        (str(done), "succeeded"),
        (str(cancelled), "failed"),
    ]


def test_a_task_taken_while_its_worker_stops_goes_back_to_the_queue_uncharged(make_app, sql):
    app, client, actions = signed_in(make_app, **QUEUE)
    job_id = job_id_from(actions.submit())
    app.extensions["runner"].stop_admitting()  # SIGTERM: this worker is stopping

    work_the_queue(app)

    assert sql("SELECT status, attempts FROM procrastinate_jobs") == [("todo", 1)]
    assert sql("SELECT status FROM assessment_jobs") == [("pending",)]
    assert sql("SELECT count(*) FROM point_ledger WHERE job_id IS NOT NULL") == [(0,)]
    # Another worker takes it once it is due, and runs it.
    sql("UPDATE procrastinate_jobs SET scheduled_at = now()")
    work_the_queue(make_app(**QUEUE))
    assert sql("SELECT status FROM procrastinate_jobs") == [("succeeded",)]
    # The message is the work's own: the minimal work's, not the report's.
    assert sql("SELECT status, message FROM assessment_jobs") == [("succeeded", "The job is done.")]
    assert sql("SELECT job_id = %(j)s FROM point_ledger WHERE kind = 'consume'", j=job_id) == [
        (True,)
    ]


def test_a_task_whose_worker_shuts_down_before_it_starts_goes_back_uncharged(make_app, sql):
    # DRAIN_SECONDS=0: the shutdown settles at once whatever lives in the worker. A task
    # taken just before it is tracked there but has not started: it is left pending, and
    # the task's start, reached only after the stop, sees the stop signal.
    app, client, actions = signed_in(make_app, **QUEUE)
    job_id = job_id_from(actions.submit())
    runner = app.extensions["runner"]

    with app.app_context(), runner.track(job_id) as stop:
        closing = threading.Thread(target=runner.shutdown)
        closing.start()
        assert stop.wait(5)
        pipeline.run(job_id, stop)  # as the task's thread would, a moment late
        assert sql("SELECT status, error_code FROM assessment_jobs") == [("pending", None)]
    closing.join(5)

    assert sql("SELECT status, error_code FROM assessment_jobs") == [("pending", None)]
    assert sql("SELECT count(*) FROM point_ledger WHERE job_id IS NOT NULL") == [(0,)]


def test_a_task_that_does_not_come_back_at_shutdown_is_failed_at_once(make_app, sql):
    # Its thread waits on something else (a connection, a lock) past the requeue's wait:
    # its page must not wait a lease for the truth. It never started: no point was used.
    app, client, actions = signed_in(make_app, **QUEUE)
    job_id = job_id_from(actions.submit())
    runner = app.extensions["runner"]

    with app.app_context(), runner.track(job_id):
        runner.shutdown()
        assert sql("SELECT status, error_code FROM assessment_jobs") == [("failed", "INTERRUPTED")]

    assert sql("SELECT count(*) FROM point_ledger WHERE job_id IS NOT NULL") == [(0,)]
    assert sql("SELECT point_balance FROM users") == [(3,)]


def test_a_second_delivery_in_the_same_worker_shares_the_first_ones_stop(make_app):
    app, client, actions = signed_in(make_app, **QUEUE)
    job_id = job_id_from(actions.submit())
    runner = app.extensions["runner"]

    with runner.track(job_id) as first, runner.track(job_id) as second:
        assert second is first  # the shutdown's stop reaches both
        assert runner.running_ids() == [job_id]
    assert runner.running_ids() == []


def test_a_job_started_again_after_a_drain_is_not_said_to_be_draining(make_app, sql):
    # Marked draining while it waited in a stopping worker, then requeued and taken by
    # another: its page must not say "finishing before a restart" until a heartbeat.
    app, client, actions = signed_in(make_app, **QUEUE)
    job_id = job_id_from(actions.submit())
    sql("UPDATE assessment_jobs SET draining = true")

    with app.app_context():
        assert transitions.start(job_id, uuid.uuid4()) is not None

    assert sql("SELECT status, draining FROM assessment_jobs") == [("running", False)]


def test_a_shutdown_during_the_start_sends_the_task_back_uncharged(make_app, sql):
    # The shutdown comes while the task's start holds the row (moved to running, not yet
    # charged): the start reads the stop signal under that lock and rolls back; the
    # shutdown, waiting on the lock, then finds the job pending and leaves it.
    app, client, actions = signed_in(make_app, **QUEUE)
    job_id = job_id_from(actions.submit())
    runner = app.extensions["runner"]
    outcome = []

    def task():
        with failpoints.on_this_thread("after_running=sleep:0.5"):
            try:
                procrastinate_executor.run_task(app, str(job_id))
            except Exception as exc:  # noqa: BLE001 - the test reads which one
                outcome.append(exc)

    thread = threading.Thread(target=task)
    thread.start()
    # Its UPDATE is not committed, so not visible: wait for its transaction to idle.
    wait_for(
        lambda: idle_in_transaction(sql, "UPDATE assessment_jobs j SET status = 'running'%") == 1
    )
    runner.shutdown()
    thread.join(10)

    assert [type(exc) for exc in outcome] == [procrastinate_executor.Requeued]
    assert sql("SELECT status, error_code FROM assessment_jobs") == [("pending", None)]
    assert sql("SELECT count(*) FROM point_ledger WHERE job_id IS NOT NULL") == [(0,)]
    assert sql("SELECT point_balance FROM users") == [(3,)]


def test_a_database_blip_as_the_task_ends_still_records_its_job_succeeded(
    make_app, sql, db_proxy, database_url
):
    """make chaos found it: the task's last read of its job failed, so the queue recorded
    the task of a job that had succeeded as failed."""
    from tests.conftest import _sa

    uri = _sa(db_proxy.url(database_url))
    app, client, actions = signed_in(make_app, SQLALCHEMY_DATABASE_URI=uri, **QUEUE)
    job_id = job_id_from(actions.submit())
    ended = []

    def task():
        with failpoints.on_this_thread("before_task_outcome=sleep:1"):
            procrastinate_executor.run_task(app, str(job_id))  # raises if not succeeded
        ended.append(True)

    thread = threading.Thread(target=task)
    thread.start()
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    db_proxy.down()  # gone while the task reads its job's outcome
    threading.Timer(1.5, db_proxy.up).start()
    thread.join(10)

    assert ended == [True]
