"""Configuration from the environment, with the defaults of docs/architecture.md."""

import os
import secrets
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def flag(raw: str) -> bool:
    """Read a yes/no setting: 1, true, yes or on mean yes."""
    return raw.strip().lower() in ("1", "true", "yes", "on")


def is_on(value: object) -> bool:
    """Read a yes/no setting given typed (True) or as text ("1", "yes", "on")."""
    return value is True or (isinstance(value, str) and flag(value))


def keys(raw: str) -> list[str]:
    """Split a comma-separated list of keys."""
    return [key.strip() for key in raw.split(",") if key.strip()]


# name -> (type, default); every one can be set in the environment.
SETTINGS: dict[str, tuple[Callable[[str], object], object]] = {
    "JOB_LEASE_SECONDS": (float, 30),
    "JOB_HEARTBEAT_SECONDS": (float, 10),
    "JOB_MAX_RUNTIME_SECONDS": (float, 900),
    "MAX_CONCURRENT_JOBS": (int, 8),
    "JOB_EXECUTOR": (str, "thread"),
    "MAX_QUEUED_JOBS": (int, 16),
    "SIGNUP_POINTS": (int, 3),
    "ASSESSMENT_WORK_SECONDS": (float, 30),
    "POLL_INTERVAL_SECONDS": (float, 2),
    "LAYER_PROVIDER": (str, ""),
    "LAYER_HTTP_BASE_URL": (str, ""),
    "LAYER_HTTP_TIMEOUT_SECONDS": (float, 10),
    "LAYER_HTTP_RETRIES": (int, 2),
    "LAYER_RETRY_BACKOFF_SECONDS": (float, 0.5),
    "LAYER_RETRY_AFTER_MAX_SECONDS": (float, 5),
    "JSHIS_BASE_URL": (str, "https://www.j-shis.bosai.go.jp/map/api"),
    "JSHIS_MAP_VERSION": (str, "Y2024"),
    "JSHIS_CASE": (str, "AVR"),
    "JSHIS_GROUND_VERSION": (str, "V4"),
    "LAYER_CACHE_TTL_SECONDS": (float, 300),
    "LAYER_CACHE_SIZE": (int, 4096),
    "TILE_CACHE_TTL_SECONDS": (float, 7 * 24 * 3600),
    "TILE_CACHE_SIZE": (int, 512),
    "HAZARD_PORTAL_URL": (str, "https://disaportaldata.gsi.go.jp/raster"),
    "BASEMAP_URL": (str, "https://cyberjapandata.gsi.go.jp/xyz/pale"),
    "EVACUATION_SITES_URL": (str, "https://maps.gsi.go.jp/xyz"),
    "LAYER_HTTP_PER_HOST": (int, 4),
    "ZONE_TILE_BUDGET": (int, 64),
    # Processes that decode and count zone tiles beside the worker; unset or 0: in the
    # job's thread (the pool's processes cost ~100 MiB: grid/pixels.py).
    "ZONE_PROCESSES": (int, None),
    # Tiles whose pixels a process works at once in its jobs' threads, in turn (pixels.py).
    "ZONE_DECODERS": (int, None),
    "PROVIDER_PROBE_SECONDS": (float, 3),
    "PROVIDER_RECHECK_SECONDS": (float, 300),
    "SHARED_LAYER_CACHE": (str, "auto"),
    "WORK_PROCESS": (str, "auto"),
    # The work a job is paid for (app/jobs/work.py's contract): the area assessment.
    "JOB_WORK": (str, "app.assessment.job"),
    # With real providers, an address is placed to its 番地 by GSI's address search.
    "GSI_ADDRESS_SEARCH_URL": (str, "https://msearch.gsi.go.jp/address-search/AddressSearch"),
    "REPORT_RETENTION_DAYS": (float, 30),
    "HOUSEKEEPING_INTERVAL_SECONDS": (float, 600),
    # How often stale jobs of all users are reaped and refunded; unset: JOB_LEASE_SECONDS.
    "SWEEP_INTERVAL_SECONDS": (float, None),
    "SUPPORT_CONTACT": (str, "support@example.com"),
    "FAILPOINTS": (str, ""),
    # Old keys still accepted while SECRET_KEY rotates, so a new key signs nobody out.
    "SECRET_KEY_FALLBACKS": (keys, []),
    # Send the session cookie over https only; off since `make run` serves plain http.
    "SESSION_COOKIE_SECURE": (flag, False),
    # Brakes on password guessing and sign-up floods (app/web/auth.py), per client address.
    # Failed log-ins from browsers without a device cookie for the account (app/web/devices.py):
    "LOGIN_RATE_LIMIT": (str, "10 per 15 minutes"),  # per account and address
    "LOGIN_ADDRESS_RATE_LIMIT": (str, "50 per 15 minutes"),  # per address, any account
    "LOGIN_ACCOUNT_RATE_LIMIT": (str, "20 per hour"),  # per account, every address together
    # Failed log-ins from a browser with one: per device cookie, and nothing else.
    "LOGIN_DEVICE_RATE_LIMIT": (str, "10 per 15 minutes"),
    # accounts created and sign-ups naming an email in use, per address
    "SIGNUP_RATE_LIMIT": (str, "10 per hour"),
    # Where the counts live; unset: the app's own PostgreSQL (app/database/brakes.py), which
    # every process shares. memory:// counts per process; redis://host:6379 works too.
    "RATELIMIT_STORAGE_URI": (str, ""),
    # Proxies in front that append to X-Forwarded-For: the brakes count by the client's
    # address it names, for requests from FORWARDED_ALLOW_IPS only (app/web/proxies.py).
    "PROXY_FIX_X_FOR": (int, 0),
    # The proxies whose headers are believed, as gunicorn.conf.py reads it too.
    "FORWARDED_ALLOW_IPS": (str, ""),
    "DRAIN_SECONDS": (float, 0),
    "METRICS_TOKEN": (str, ""),
    "LOG_FORMAT": (str, "text"),
    "ALERT_WEBHOOK_URL": (str, ""),
    "ALERT_TIMEOUT_SECONDS": (float, 3),
    # Points people buy (app/points/checkout.py): packs as points:yen, tax included.
    # Purchases are offered only with the packs, the secret key and the webhook secret set.
    "POINT_PACKS": (str, ""),
    "STRIPE_SECRET_KEY": (str, ""),
    "STRIPE_WEBHOOK_SECRET": (str, ""),
    "STRIPE_API_BASE": (str, ""),  # unset: Stripe's own; tests point it at a local server
    "STRIPE_TIMEOUT_SECONDS": (float, 10),
    "BUY_RATE_LIMIT": (str, "10 per 10 minutes"),  # Checkout Sessions created, per user
    # The site's address as buyers reach it (https://points.example.com): Stripe's return
    # URLs are built from it, never from a request's Host, and Flask's TRUSTED_HOSTS
    # (derived from it) refuses other hosts. Unset, points are on sale only with a
    # test-mode key (development), returning to http://127.0.0.1:$PORT.
    "PUBLIC_URL": (str, ""),
    # Hosts Flask answers, comma-separated (Flask's TRUSTED_HOSTS; a leading dot allows
    # subdomains). Unset with PUBLIC_URL set: its host and loopback. Name here every Host a
    # proxy or a health check sends (a pod's address, say), or they get 400.
    "TRUSTED_HOSTS": (keys, None),
    # Points on sale while reports are demonstration data: a test shop (test-mode key only).
    "TEST_SHOP": (flag, False),
    # The seller, as the 特定商取引法に基づく表記 and the terms name it. Selling needs the
    # name, the representative, a contact email (SUPPORT_CONTACT) and the address and
    # phone, or SELLER_DISCLOSE_ON_REQUEST for those two: "disclosed without delay on
    # request", as the law allows for them (and for nothing else).
    "SELLER_NAME": (str, ""),
    "SELLER_REPRESENTATIVE": (str, ""),
    "SELLER_ADDRESS": (str, ""),
    "SELLER_PHONE": (str, ""),
    "SELLER_DISCLOSE_ON_REQUEST": (flag, False),
    # 適格請求書発行事業者登録番号 (T and 13 digits), printed on receipts when set.
    "SELLER_INVOICE_NUMBER": (str, ""),
    "POINT_REFUND_DAYS": (int, 30),  # unused purchased points are refunded on request within
    # How long points stay valid from the day they are added; 180 days or fewer keeps
    # them within 資金決済法's exemption for instruments usable only within six months.
    "POINTS_VALID_DAYS": (int, 180),
    # A support grant above this many points needs a second support user's approval.
    "SUPPORT_GRANT_APPROVAL_POINTS": (int, 10),
}


def sqlalchemy_url(url: str) -> str:
    """Return a database URL that SQLAlchemy drives with psycopg 3."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def secret_key() -> str:
    """Return SECRET_KEY, or one generated once and kept in ./.secret_key."""
    if key := os.environ.get("SECRET_KEY"):
        return key
    path = ROOT / ".secret_key"
    if not path.exists():
        # O_EXCL: two processes starting at once agree on one key.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
    return path.read_text().strip()


def from_env() -> dict[str, object]:
    """Read the settings from the environment, typed, with their defaults."""
    config: dict[str, object] = {}
    for name, (kind, default) in SETTINGS.items():
        raw = os.environ.get(name)
        try:
            config[name] = kind(raw) if raw not in (None, "") else default
        except ValueError:
            raise ValueError(f"{name} must be a {kind.__name__}, not {raw!r}") from None
    return config


def check(config: dict, late_heartbeats: float) -> None:
    """Raise ValueError, naming the setting, for settings with which jobs cannot work."""
    for name in (
        "JOB_LEASE_SECONDS",
        "JOB_HEARTBEAT_SECONDS",
        "JOB_MAX_RUNTIME_SECONDS",
        "POLL_INTERVAL_SECONDS",
        "HOUSEKEEPING_INTERVAL_SECONDS",
        "SWEEP_INTERVAL_SECONDS",
    ):
        if not config[name] > 0:
            raise ValueError(f"{name} must be positive, not {config[name]!r}")
    if config["MAX_CONCURRENT_JOBS"] < 1:
        raise ValueError(
            f"MAX_CONCURRENT_JOBS must be at least 1, not {config['MAX_CONCURRENT_JOBS']}"
        )
    lease, beat = config["JOB_LEASE_SECONDS"], config["JOB_HEARTBEAT_SECONDS"]
    # A live job must beat well inside its lease, or the reaper fails it while it works.
    if beat >= lease:
        raise ValueError(
            f"JOB_HEARTBEAT_SECONDS ({beat:g}) must be shorter than JOB_LEASE_SECONDS ({lease:g})"
        )
    # The page says "checking" after a few missed beats; past the lease that never shows.
    if late_heartbeats * beat >= lease:
        raise ValueError(
            f"JOB_HEARTBEAT_SECONDS ({beat:g}) times {late_heartbeats:g} missed heartbeats"
            f" must be shorter than JOB_LEASE_SECONDS ({lease:g})"
        )
