"""One log line per event, with job_id, user_id, the transition and its outcome."""

import json
import re

import pytest

from tests.conftest import wait_for
from tests.live import User

pytestmark = pytest.mark.server


def run_one_job(live, sql, **env):
    server = live(**env)
    user = User(server)
    user.signup("logged@example.com")
    assert user.submit().status_code == 303
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    server.stop()
    (job_id,) = sql("SELECT id FROM assessment_jobs")[0]
    (user_id,) = sql("SELECT id FROM users")[0]
    return server.log_path.read_text(), str(job_id), user_id


def test_json_lines_carry_the_events_fields(live, sql):
    text, job_id, user_id = run_one_job(live, sql, LOG_FORMAT="json")
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # every one JSON
    finishes = [r for r in lines if r.get("transition") == "finish"]
    assert len(finishes) == 1
    (finish,) = finishes
    assert finish["outcome"] == "succeeded"
    assert (finish["job_id"], finish["user_id"]) == (job_id, user_id)
    assert finish["time"] and finish["level"] == "INFO"
    (start,) = [r for r in lines if r.get("transition") == "start"]
    assert (start["outcome"], start["job_id"], start["user_id"]) == ("running", job_id, user_id)
    submit = next(r for r in lines if r.get("transition") == "submit")
    assert (submit["outcome"], submit["job_id"]) == ("303", job_id)
    assert any(r["name"] == "gunicorn.error" for r in lines)  # gunicorn's own lines too


def test_text_lines_are_readable_with_timestamps(live, sql):
    text, job_id, user_id = run_one_job(live, sql)
    (line,) = [x for x in text.splitlines() if "transition=finish" in x]
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ INFO app.events: job succeeded:", line)
    assert f"job_id={job_id} user_id={user_id}" in line
    assert "outcome=succeeded" in line
