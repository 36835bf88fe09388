"""The log-in brakes' counts in PostgreSQL: what they cost a log-in, against memory storage.

In-process, two apps on one fresh database, one counting in memory (memory://, per process)
and one in PostgreSQL (the default, app/database/brakes.py), measured alternately in the
same run:
- a failed log-in POST through Flask's test client (the CSRF token fetched beforehand, not
  timed): the brakes' count before the password check (app/web/brakes.py), the hash;
- the brakes' own work for one failed log-in, alone: hit() of each of the view's limits,
  as app/web/brakes.py does for it.
Each attempt uses a new email and client address, so no brake trips. Medians.

    python -m bench.brakes [--logins 200]
"""

import statistics
import time
import uuid

from limits import parse
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from bench.common import log, run_alone

WIDE = "100000 per hour"  # counted as the real ones are, never tripped


def _app(db_url: str, storage_uri: str):
    from app import create_app
    from app.config import sqlalchemy_url

    config = {
        "TESTING": True,
        "SECRET_KEY": "bench-secret",
        "SQLALCHEMY_DATABASE_URI": sqlalchemy_url(db_url),
        "LOGIN_RATE_LIMIT": WIDE,
        "LOGIN_ADDRESS_RATE_LIMIT": WIDE,
        "LOGIN_ACCOUNT_RATE_LIMIT": WIDE,
        "LOGIN_DEVICE_RATE_LIMIT": WIDE,
    }
    if storage_uri:
        config["RATELIMIT_STORAGE_URI"] = storage_uri
    return create_app(config)


def _failed_login(app, token_client) -> float:
    client, token = token_client
    address = f"10.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}"
    began = time.perf_counter()
    response = client.post(
        "/login",
        data={"email": f"{uuid.uuid4().hex}@example.com", "password": "x" * 9, "csrf_token": token},
        environ_base={"REMOTE_ADDR": address},
    )
    elapsed = time.perf_counter() - began
    assert response.status_code == 400, response.status_code
    return elapsed


def _client(app):
    from tests.conftest import csrf_token

    client = app.test_client()
    return client, csrf_token(client.get("/login").get_data(as_text=True))


def _brake_alone(limiter: MovingWindowRateLimiter, limits: int) -> float:
    item = parse(WIDE)
    keys = [f"bench/{uuid.uuid4().hex}/{n}" for n in range(limits)]
    began = time.perf_counter()
    for key in keys:
        limiter.hit(item, key)
    return time.perf_counter() - began


def run(db, logins: int = 200) -> dict:
    """Measure both storages alternately; return medians in milliseconds and their ratios."""
    from flask_migrate import upgrade

    from app.extensions import limiter

    migrating = _app(db.url, "memory://")
    with migrating.app_context():
        upgrade()
    apps = {"memory": _app(db.url, "memory://"), "postgresql": _app(db.url, "")}
    clients = {name: _client(app) for name, app in apps.items()}
    # How many limits a failed log-in counts: the rows a few of them write.
    warm = 5
    limiter.init_app(apps["postgresql"])
    for _ in range(warm):
        _failed_login(apps["postgresql"], clients["postgresql"])
    per_login = db.scalar("SELECT count(*) FROM brake_hits") // warm
    alone = {
        "memory": MovingWindowRateLimiter(storage_from_string("memory://")),
        "postgresql": MovingWindowRateLimiter(
            storage_from_string(apps["postgresql"].config["RATELIMIT_STORAGE_URI"])
        ),
    }
    login_times = {name: [] for name in apps}
    brake_times = {name: [] for name in apps}
    log(f"brakes: {logins} failed log-ins per storage, {per_login} limits each")
    for i in range(logins):
        order = ("memory", "postgresql") if i % 2 else ("postgresql", "memory")
        for name in order:
            # Flask-Limiter is one object: init_app bound it to the last app built.
            limiter.init_app(apps[name])
            login_times[name].append(_failed_login(apps[name], clients[name]))
            brake_times[name].append(_brake_alone(alone[name], per_login))
    med = {name: statistics.median(v) * 1000 for name, v in login_times.items()}
    brake = {name: statistics.median(v) * 1000 for name, v in brake_times.items()}
    return {
        "logins": logins,
        "limits_per_login": per_login,
        "failed_login_ms": med,
        "failed_login_ratio": med["postgresql"] / med["memory"],
        "brake_alone_ms": brake,
        "brake_alone_ratio": brake["postgresql"] / brake["memory"],
        "brake_added_per_login_ms": brake["postgresql"] - brake["memory"],
    }


if __name__ == "__main__":
    run_alone(run, __doc__, logins=200)
