"""Configuration from the environment, with the defaults of docs/architecture.md."""

import os
import secrets
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# name -> (type, default); every one can be set in the environment.
SETTINGS: dict[str, tuple[type, object]] = {
    "JOB_LEASE_SECONDS": (float, 30),
    "JOB_HEARTBEAT_SECONDS": (float, 10),
    "JOB_MAX_RUNTIME_SECONDS": (float, 900),
    "MAX_CONCURRENT_JOBS": (int, 8),
    "SIGNUP_POINTS": (int, 3),
    "ASSESSMENT_WORK_SECONDS": (float, 30),
    "POLL_INTERVAL_SECONDS": (float, 2),
    "LAYER_PROVIDER": (str, "demo"),
    "LAYER_HTTP_BASE_URL": (str, ""),
    "LAYER_HTTP_TIMEOUT_SECONDS": (float, 10),
    "LAYER_HTTP_RETRIES": (int, 2),
    "LAYER_RETRY_BACKOFF_SECONDS": (float, 0.5),
    "LAYER_RETRY_AFTER_MAX_SECONDS": (float, 5),
    "JSHIS_BASE_URL": (str, "https://www.j-shis.bosai.go.jp/map/api"),
    "JSHIS_MAP_VERSION": (str, "Y2024"),
    "JSHIS_CASE": (str, "AVR"),
    "JSHIS_GROUND_VERSION": (str, "V4"),
    "GSI_ELEVATION_URL": (
        str,
        "https://cyberjapandata2.gsi.go.jp/general/dem/scripts/getelevation.php",
    ),
    "LAYER_CACHE_TTL_SECONDS": (float, 300),
    "LAYER_CACHE_SIZE": (int, 4096),
    "REPORT_RETENTION_DAYS": (float, 30),
    "HOUSEKEEPING_INTERVAL_SECONDS": (float, 600),
    "FAILPOINTS": (str, ""),
    "DRAIN_SECONDS": (float, 0),
    "METRICS_TOKEN": (str, ""),
    "LOG_FORMAT": (str, "text"),
    "ALERT_WEBHOOK_URL": (str, ""),
    "ALERT_TIMEOUT_SECONDS": (float, 3),
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
        config[name] = kind(raw) if raw not in (None, "") else default
    return config
