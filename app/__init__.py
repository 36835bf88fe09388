"""Area assessments: paid multi-minute jobs, run in-process, honest about points.

create_app() is the composition root: the one place that wires app.web, app.jobs,
app.points, app.assessment and the root modules together.
"""

import logging
from typing import Any

from flask import Flask
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from . import config, embedded, failpoints
from .extensions import babel, csrf, db, login_manager, migrate


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Create and configure the app."""
    app = Flask(__name__, template_folder="../templates", static_folder="../static")
    app.config.from_mapping(
        MAX_CONTENT_LENGTH=64 * 1024,
        # No pre-ping: it is a round trip on every checkout, as much as the poll's query.
        # Connections are recycled instead; one that broke fails its request and is dropped.
        SQLALCHEMY_ENGINE_OPTIONS={"pool_size": 10, "max_overflow": 30, "pool_recycle": 1800},
        WTF_CSRF_TIME_LIMIT=None,
        **config.from_env(),
    )
    if test_config is not None:
        app.config.from_mapping(test_config)
    if "SECRET_KEY" not in app.config or not app.config["SECRET_KEY"]:
        app.config["SECRET_KEY"] = config.secret_key()
    if "SQLALCHEMY_DATABASE_URI" not in app.config:
        app.config["SQLALCHEMY_DATABASE_URI"] = config.sqlalchemy_url(embedded.database_url())
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    failpoints.configure(app.config["FAILPOINTS"])

    db.init_app(app)
    migrate.init_app(app, db, directory=str(config.ROOT / "migrations"))
    csrf.init_app(app)
    login_manager.init_app(app)
    from .web import i18n

    babel.init_app(
        app,
        default_translation_directories=str(config.ROOT / "translations"),
        locale_selector=i18n.select_locale,
        timezone_selector=i18n.select_timezone,
    )
    i18n.init_jinja(app)

    from .assessment import make_provider
    from .jobs.housekeeping import Throttle
    from .jobs.runner import Runner
    from .singleflight import SingleFlightCache

    app.extensions["runner"] = Runner(
        app, app.config["MAX_CONCURRENT_JOBS"], app.config["JOB_HEARTBEAT_SECONDS"]
    )
    app.extensions["housekeeping"] = Throttle()
    # One process serves every request, so failed log-ins are counted exactly in memory.
    app.extensions["login_failures"] = MovingWindowRateLimiter(MemoryStorage())
    app.extensions["layer_provider"] = make_provider(app.config)
    app.extensions["layer_cache"] = SingleFlightCache(
        maxsize=app.config["LAYER_CACHE_SIZE"], ttl=app.config["LAYER_CACHE_TTL_SECONDS"]
    )

    from .web import assessments, auth, cli, errors, health, main, preferences, support

    for module in (auth, main, assessments, support, health, preferences):
        app.register_blueprint(module.bp)
    errors.init_app(app)
    cli.init_app(app)
    from .web.poll import LivePoll

    app.wsgi_app = LivePoll(app, app.wsgi_app)
    return app
